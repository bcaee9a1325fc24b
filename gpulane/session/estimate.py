"""How long a sweep takes: a floor told before it starts, and a forecast that learns from
the points measured so far.

- :func:`sweep_estimate_s`: every point's calls at a bandwidth the path reaches at best. A
  floor, not a forecast ("at least 0:05:46"), told before the ranks start.
- :class:`SweepForecast`: the live ETA. Before any point is measured it is the a-priori
  model and says so ("rough"). Then a line's time (its wall time: every placement, the
  warm-up, checked and timed calls, the check itself; the first line timed from rank 0's
  heartbeat, not from the ranks' start-up) comes, per collective, from the times known
  at the sizes around it, interpolated in log-log: the lines done, and the ranging shot
  (``collectives/ranging``: timed calls, a fill and a check per collective at the
  smallest and largest sizes and two below the largest, made before the first point,
  counted as a line makes them). The shots still ahead are calibrated by the lines done
  as ``o + r * shot``: a line's own cost, and a host busier than during the shot. Without a
  ranging shot (progress=false, a short sweep), sizes above the largest done are
  extrapolated from the lines done: the latency ``a`` from the smallest lines and the
  growth of the time above it over the largest ones. A collective with nothing known is
  the a-priori model scaled by what the others took against theirs; a point running past
  its forecast stretches the rest as much.
- The band (``±30 %``): each line left, weighted by its time, as far off as it may be:
  resting on a shot, half its calls' spread plus SHOT_BAND; else how far the forecast
  missed the last lines done (from the times known without each); UNSEEN_BAND more on
  sizes far above anything known.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

from gpulane.collectives.ranging import ranging_ended_at, ranging_path, read_ranging
from gpulane.rundir import read_heartbeats

# Best rates per device kind (GB/s) and a call's latency floor (s). CPU: gloo
# between processes of one host (0.4-0.6 GB/s measured on the 2-core test machine; 1.0
# keeps the figure a floor).
RATE_GBPS = {"cpu": 1.0, "cuda": 100.0}
LATENCY_S = {"cpu": 30e-6, "cuda": 8e-6}
# The forecast's a-priori rates (bytes of a line's size per second of its calls), until
# a line's time shows its size: CPU from an 8 B-8 MiB gloo sweep on the 2-core test machine
# (2026-12-02, load average ~10): its 16 KiB-8 MiB lines took 13.3 s for 52 calls' worth
# of 16.7 MB; GPU a guess (a tenth of NVLink's). The band says how much rests on them.
FORECAST_GBPS = {"cpu": 0.065, "cuda": 50.0}
# A size term counts once it is this many times the fitted latency term: below it, the
# "per byte" time is the latency's noise, and extrapolating it would be a guess.
SIZE_TERM_ABOVE = 2.0
BAND_MIN, BAND_MAX = 0.10, 1.00
RECENT = 5  # lines whose misses make the band
# Added to the band at full weight when all the time left is on sizes over 4x the largest
# measured: a line's time there rests on a rate seen only at smaller sizes.
UNSEEN_BAND = 0.25
# Added at full weight when all the time left rests on ranging calls: one call against a
# line's mean of many, on a host whose other jobs come and go.
# Added to a shot's own spread: the gap between a shot and the line it tells, seen at
# 128 MiB on the 2-core VM (+5.7 % and -10.2 %, two traced sweeps, 2026-12-02 13:12-13:18 UTC).
SHOT_BAND = 0.15
# The calibration of the shots ahead: its ratio from the largest lines done, this many,
# within R_LIMIT either way.
CALIBRATE_ON = 5
R_LIMIT = 4.0


def _calls(plan: Any) -> int:
    timing = plan.timing
    calls = timing.warmup + timing.check_iters
    return int(calls + timing.iters * (timing.graph_launches if timing.graph else 1))


def _turns(device: str, ranks: int, cores: int) -> float:
    """How much slower every call is when the ranks take turns on the cores."""
    return ranks / max(cores, 1) if device != "cuda" and ranks > cores else 1.0


def sweep_estimate_s(plan: Any, ranks: int, device: str, cores: int) -> float:
    """Seconds the sweep ``plan`` takes at least on ``ranks`` ranks of ``device``."""
    kind = "cuda" if device == "cuda" else "cpu"
    rate = RATE_GBPS[kind] * 1e9
    per_set = sum(LATENCY_S[kind] + size / rate for size in plan.sizes)
    total = _calls(plan) * per_set * len(plan.collectives) * len(plan.dtypes)
    return float(total * len(plan.placements) * _turns(kind, ranks, cores))


def plan_lines(plan: Any) -> list[tuple[str, int]]:
    """(collective, size) of every table line, in the order the ranks measure them."""
    return [(op, int(size)) for op in plan.collectives for _ in plan.dtypes for size in plan.sizes]


def _loglog(size: int, s0: int, t0: float, s1: int, t1: float) -> float:
    """The time at ``size`` on the straight line through (s0, t0), (s1, t1) in log-log."""
    if s0 == s1 or min(s0, s1, size) <= 0 or min(t0, t1) <= 0:
        return t0 if size <= s0 else t1
    share = (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0))
    return math.exp(math.log(t0) + share * (math.log(t1) - math.log(t0)))


class SweepForecast:
    """The time left of a sweep, from the lines done so far (see the module's text).

    ``lines``: (collective, size) per table line, in order; ``prior_a``/``prior_b``: the
    a-priori seconds of a line as ``a + b * size``; ``timing``: the plan's warm-up, iters and
    checks, which turn a ranging shot's seconds into a line's (None: the ranging shot is
    not used). The session tells it how many lines are done
    (:meth:`observe`, with the time); it answers :meth:`eta` and :meth:`now_doing`."""

    def __init__(
        self,
        lines: list[tuple[str, int]],
        prior_a: float,
        prior_b: float,
        run_dir: Path | None = None,
        timing: Any | None = None,
    ) -> None:
        self.lines = lines
        # where rank 0's heartbeat says when the first point began (the ranks' start-up
        # is then not counted as the first line's time), and its ranging shot
        self.run_dir = run_dir
        self.first_start: float | None = None
        self.prior_a = prior_a
        self.prior_b = prior_b
        self.timing = timing
        self.done = 0
        self.last_end: float | None = None  # when the latest line was seen done
        self.took: dict[int, float] = {}  # line -> seconds (the first line: start-up too)
        # (op, size) -> a line's seconds at its ranging shot's pace
        self.ranged: dict[tuple[str, int], float] = {}
        self.spreads: dict[tuple[str, int], float | None] = {}  # its timed calls' spread
        self._ranging_bytes = -1
        self._cache: dict[tuple[str, int, bool], float] = {}

    @classmethod
    def for_plan(
        cls, plan: Any, ranks: int, device: str, cores: int, run_dir: Path | None = None
    ) -> SweepForecast:
        kind = "cuda" if device == "cuda" else "cpu"
        per_line = _calls(plan) * len(plan.placements) * _turns(kind, ranks, cores)
        a, b = per_line * LATENCY_S[kind], per_line / (FORECAST_GBPS[kind] * 1e9)
        return cls(plan_lines(plan), a, b, run_dir, plan.timing)

    def _first_point_started(self, now: float) -> float | None:
        """When rank 0 began the first point (its heartbeat), on this clock."""
        if self.first_start is None and self.run_dir is not None:
            beat = read_heartbeats(self.run_dir).get(0)
            # index 0 is the ranging shot too (collectives/ranging), told by its label;
            # later points: too late to tell
            if beat is not None and beat.index == 0 and not beat.label.startswith("ranging"):
                self.first_start = now - max(time.time() - beat.at, 0.0)
            elif (ended := ranging_ended_at(self.run_dir)) is not None:
                # points fast enough that no poll saw the first one's beat: it began
                # when the ranging shot ended
                self.first_start = now - max(time.time() - ended, 0.0)
        return self.first_start

    def _read_ranging(self) -> None:
        """Rank 0's ranging calls, read again whenever the file grew."""
        if self.run_dir is None or self.timing is None:
            return
        path = ranging_path(self.run_dir)
        try:
            size = path.stat().st_size
        except OSError:
            return
        if size != self._ranging_bytes:
            self._ranging_bytes = size
            shots = read_ranging(self.run_dir)
            ranged = {k: shot.line_s(self.timing) for k, shot in shots.items()}
            # a shot slower than one at a larger size is a spike of the host's (its
            # other jobs), not the path's: dropped, the sizes around it tell its size
            self.ranged = {}
            for op, size in sorted(ranged, key=lambda k: (k[0], -k[1])):
                above = [t for (o, s), t in self.ranged.items() if o == op and s > size]
                if all(ranged[(op, size)] <= t for t in above):
                    self.ranged[(op, size)] = ranged[(op, size)]
            self.spreads = {k: shot.spread for k, shot in shots.items()}
            self._cache.clear()

    # -- what happened ----------------------------------------------------------------
    def observe(self, done: int, now: float) -> None:
        """``done`` lines are complete at ``now`` (monotonic seconds)."""
        done = min(done, len(self.lines))
        self._read_ranging()
        if self.done == 0:
            start = self._first_point_started(now)
            if start is not None:
                self.last_end = start  # the first line's clock: its point began
        if done <= self.done:
            if self.last_end is None and done == 0:
                self.last_end = now  # the ranks are starting
            return
        fresh = range(self.done, done)
        timed = self.first_start is not None or self.done > 0
        if self.last_end is not None and timed:
            # lines seen done in one poll share its time as the forecast would have split it
            guess = {i: self.line_s(i) for i in fresh}
            whole = sum(guess.values()) or 1.0
            spent = now - self.last_end
            for i in fresh:
                self.took[i] = spent * guess[i] / whole
            self._cache.clear()
        self.done, self.last_end = done, now

    # -- the model --------------------------------------------------------------------
    def _measured(self, op: str, without: int | None = None) -> list[tuple[int, float]]:
        """``op``'s lines done as (size, median seconds) by size, ascending; only sizes
        but size ``without`` when given (to tell how well the others foretell it)."""
        by: dict[int, list[float]] = {}
        for i, t in self.took.items():
            o, size = self.lines[i]
            if o == op and size != without:
                by.setdefault(size, []).append(t)
        return [(size, statistics.median(ts)) for size, ts in sorted(by.items())]

    def _shot_curve(self, op: str, size: int) -> float | None:
        """A line of ``op`` at ``size`` at its ranging shots' pace, in log-log between the
        shots around it (the nearest one's pace per byte beyond them); None without one."""
        shots = sorted((s, t) for (o, s), t in self.ranged.items() if o == op and t > 0)
        if not shots:
            return None
        lower = [x for x in shots if x[0] <= size]
        upper = [x for x in shots if x[0] >= size]
        if lower and upper:
            return _loglog(size, *lower[-1], *upper[0])
        if upper:  # under the smallest shot: its latency
            return upper[0][1]
        s0, t0 = lower[-1]
        return t0 * size / max(s0, 1)

    def _calibration(self, op: str, without: int | None = None) -> tuple[float, float]:
        """``(o, r)``: a line of ``op`` takes ``o + r * shot`` seconds, from its lines done
        against the shots' curve at their sizes (else any collective's). ``o``: a line's
        own cost beyond its calls (barriers, its row, its beat), from the lines whose shot
        time is least; ``r``: a host busier or freer than during the shot, the median of
        ``(line - o) / shot`` over the largest lines at ranging sizes whose shot time is
        SIZE_TERM_ABOVE times ``o`` and the smallest line's shot time or more (1 before
        any such: below it, a ratio is the latency's noise).
        (0, 1) before any line."""
        own = self._calibration_pairs(op, without)
        if not own:
            return 0.0, 1.0
        o = max(statistics.median(y - x for x, y, _ in own[:3]), 0.0)
        # the ratio only at a shot's own size (not between two: a shot at a small size is
        # a latency, which swung 0.3-4.4 ms a call between two runs on the 2-core VM),
        # and only where its size term shows
        floor = SIZE_TERM_ABOVE * max(o, own[0][0])
        big = [(y - o) / x for x, y, at in own if at and x >= floor and x > 0]
        r = statistics.median(big[-CALIBRATE_ON:]) if big else 1.0
        return o, min(max(r, 1 / R_LIMIT), R_LIMIT)

    def _calibration_pairs(self, op: str, without: int | None) -> list[tuple[float, float, bool]]:
        """(shot curve, seconds, at a shot's own size) of ``op``'s lines done, else of any
        collective's, but those of size ``without``; by shot time, ascending."""
        pairs: dict[str, list[tuple[float, float, bool]]] = {}
        for i, t in self.took.items():
            o, size = self.lines[i]
            if o == op and size == without:
                continue
            shot = self._shot_curve(o, size)
            if shot is not None:
                pairs.setdefault(o, []).append((shot, t, (o, size) in self.ranged))
        return sorted(pairs.get(op) or [p for ps in pairs.values() for p in ps])

    def _anchors(self, op: str, without: int | None = None) -> list[tuple[int, float, bool]]:
        """(size, line seconds, from a ranging call) known for ``op``: its lines done, and
        its ranging calls above the largest of them (a line measured supersedes a call)."""
        measured = self._measured(op, without)
        top = measured[-1][0] if measured else 0
        off, ratio = self._calibration(op, without)
        shots = [
            (size, off + s * ratio, True)
            for (o, size), s in self.ranged.items()
            if o == op and size > top and s > 0
        ]
        return [(size, t, False) for size, t in measured] + sorted(shots)

    def _fit(self, op: str) -> tuple[float, float, int, float] | None:
        """``op``'s extrapolation from its lines done: (a, c, size0, k)
        for ``a + c * (size / size0) ** k`` beyond the largest size done; None before any.

        ``a``: the line time at its smallest sizes (the calls' latency). ``k``: how the
        size term (the time above ``a``) grows over the largest sizes done, from their
        log-log slope, between 0 and 1 (1: a time per byte, as a path's bandwidth gives;
        less where a loaded host's scheduling, not the bytes, sets the time). Before the
        size term shows above ``a``: the a-priori bandwidth."""
        own = self._measured(op)
        if not own:
            return None
        small = [t for _, t in own[:3]]
        a = min(statistics.median(small), min(small) * 1.5)
        big = [(size, t - a) for size, t in own[-3:] if size > 0 and t - a > SIZE_TERM_ABOVE * a]
        if len(big) < 2:
            # no size term yet: the latency measured, and the a-priori bandwidth (a
            # latency's ratio to its model says nothing of the bandwidth's)
            size0 = max(own[-1][0], 1)
            return a, self.prior_b * size0, size0, 1.0
        xs = [math.log(size) for size, _ in big]
        ys = [math.log(extra) for _, extra in big]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        k = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
            (x - mx) ** 2 for x in xs
        )
        k = min(max(k, 0.0), 1.0)
        size0 = big[-1][0]
        c = math.exp(my + k * (math.log(size0) - mx))  # the fit's size term at size0
        return a, c, size0, k

    def _latency(self) -> float | None:
        """The smallest lines' time of any collective done (a latency is alike across)."""
        fits = [self._fit(op) for op in {op for op, _ in self.lines}]
        known = [f[0] for f in fits if f is not None]
        return min(known) if known else None

    def _scale(self) -> float:
        """What the lines done took against the a-priori model (1 before any)."""
        if not self.took:
            return 1.0
        prior = sum(self._prior(i) for i in self.took)
        return sum(self.took.values()) / prior if prior > 0 else 1.0

    def _prior(self, i: int) -> float:
        return self.prior_a + self.prior_b * self.lines[i][1]

    def predict(self, op: str, size: int, without: bool = False) -> float:
        """Seconds of a line of ``op`` at ``size`` from what is known (only lines under
        ``below`` when given), not from a line of that size itself."""
        key = (op, size, without)
        if key not in self._cache:
            self._cache[key] = self._predict(op, size, size if without else None)
        return self._cache[key]

    def _predict(self, op: str, size: int, without: int | None) -> float:
        anchors = self._anchors(op, without)
        lower = [x for x in anchors if x[0] <= size]
        upper = [x for x in anchors if x[0] >= size]
        if lower and upper:
            (s0, t0, _), (s1, t1, _) = lower[-1], upper[0]
            return _loglog(size, s0, t0, s1, t1)
        if lower:  # above all that is known: extrapolated from the lines done
            fit = self._fit(op)  # as it stands: its slope needs the largest lines
            if fit is None or lower[-1][2]:  # a ranging call on top: a time per byte on
                s0, t0, _ = lower[-1]
                return t0 * size / max(s0, 1)
            a, c, size0, k = fit
            return a + c * (size / size0) ** k
        prior = self._prior_s(size)
        if upper:  # under the smallest size known: from the latency to the ranging call
            s1, t1, _ = upper[0]
            latency = self._latency()
            smallest = min(s for o, s in self.lines if o == op)
            if latency is None or smallest >= s1:
                return min(prior, t1)
            return _loglog(size, smallest, min(latency, t1), s1, t1)
        return prior

    def _prior_s(self, size: int) -> float:
        return (self.prior_a + self.prior_b * size) * self._scale()

    def line_s(self, i: int) -> float:
        """Seconds line ``i`` takes, as the forecast stands (its own time where done)."""
        op, size = self.lines[i]
        if i in self.took:
            return self.took[i]
        same = [t for j, t in self.took.items() if self.lines[j] == (op, size)]
        if same:  # a size done already (another dtype)
            return statistics.median(same)
        return self.predict(op, size)

    def _rests_on_shot(self, op: str, size: int) -> bool:
        """Whether line (op, size)'s forecast rests on a ranging call (it lies above the
        largest line of ``op`` done, and a ranging call of ``op`` is known)."""
        measured = self._measured(op)
        top = measured[-1][0] if measured else 0
        return size > top and any(o == op and s > top for o, s in self.ranged)

    def _known_to(self, op: str) -> int:
        """The largest size of ``op`` with a line done or a ranging call."""
        sizes = [s for s, _ in self._measured(op)] + [s for o, s in self.ranged if o == op]
        return max(sizes, default=0)

    # -- what it says ----------------------------------------------------------------
    def left_s(self, now: float) -> float:
        """Seconds left: the lines after the current one, and what the current one still
        takes (a line past its forecast is taken to need as long again as it has run)."""
        if self.done >= len(self.lines):
            return 0.0
        rest = [self.line_s(i) for i in range(self.done, len(self.lines))]
        if self.last_end is None or (self.done == 0 and self.first_start is None):
            return sum(rest)  # the ranks are starting: no point running yet
        ran = now - self.last_end
        current = rest[0]
        if ran > current:  # slower than forecast: the larger sizes after it are too
            factor = ran / current if current > 0 else 1.0
            return ran + factor * sum(rest[1:])
        return current - ran + sum(rest[1:])

    def band(self) -> float | None:
        """The relative band of :meth:`left_s`; None while it is the a-priori model. Each
        line left adds its time times how far off it may be: a line resting on a ranging
        shot, half its calls' spread plus SHOT_BAND; any other, how far the forecast
        missed the last lines done (told from the times known without each); one far
        above anything known, UNSEEN_BAND more."""
        if not self.took:
            return None
        recent = sorted(self.took)[-RECENT:]
        pairs = [(self.predict(*self.lines[i], without=True), self.took[i]) for i in recent]
        weight = sum(p for p, _ in pairs)
        missed = sum(abs(t - p) for p, t in pairs) / weight if weight > 0 else 0.5
        rest = range(self.done, len(self.lines))
        times = {i: self.line_s(i) for i in rest}
        total = sum(times.values()) or 1.0
        off = 0.0
        for i, t in times.items():
            op, size = self.lines[i]
            share = self._shot_band(op, size) if self._rests_on_shot(op, size) else missed
            if size > 4 * max(self._known_to(op), 1):
                share += UNSEEN_BAND
            off += t * share
        return min(max(off / total, BAND_MIN), BAND_MAX)

    def _shot_band(self, op: str, size: int) -> float:
        """How far a line of ``op`` at ``size`` resting on its shots may be off: half the
        spread of the calls of the shot at or above it, plus SHOT_BAND."""
        above = sorted((s, v) for (o, s), v in self.spreads.items() if o == op and s >= size)
        spread = above[0][1] if above else None
        return SHOT_BAND + (spread / 2 if spread is not None else SHOT_BAND)

    def eta(self, now: float) -> str:
        """ "ETA 0:04:10 ±30 %", or "ETA 0:04:10 (rough)" before a point is measured."""
        from gpulane.session.live import clock

        left = clock(self.left_s(now))
        band = self.band()
        if band is None:
            return f"ETA {left} (rough)"
        return f"ETA {left} ±{round(band * 100):d} %"

    def now_doing(self, now: float) -> str | None:
        """The line being measured and how long it has run ("64 MiB, 0:00:12 on it")."""
        if self.done >= len(self.lines) or self.last_end is None:
            return None
        from gpulane.units import format_size

        op, size = self.lines[self.done]
        return f"{op} {format_size(size)}, {int(now - self.last_end)} s on it"
