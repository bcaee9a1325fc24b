"""How long a sweep takes: a floor told before it starts, and a forecast that learns from
the points measured so far.

- :func:`sweep_estimate_s`: every point's calls at a bandwidth the path reaches at best. A
  floor, not a forecast ("at least 0:05:46"), told before the ranks start.
- :class:`SweepForecast`: the live ETA. Before any point is measured it is the a-priori
  model and says so ("rough"). Then each table line's wall time (every placement, the
  warm-up, checked and timed calls, the check itself; the first line timed from rank 0's
  heartbeat, not from the ranks' start-up) is fitted per collective: the latency ``a``
  from its smallest lines, and the growth of the time above it over its largest lines
  done (a time per byte, or less: on a loaded host, time grows slower than the bytes),
  extrapolated to the sizes still to come; a collective not started yet is the a-priori
  model scaled by what the others took against theirs, and a point running past its
  forecast stretches the rest as much. The band (``±30 %``) is how far the fit is from
  the last lines done, widened by the share of the time left on sizes far above the
  largest one measured.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

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


class SweepForecast:
    """The time left of a sweep, from the lines done so far (see the module's text).

    ``lines``: (collective, size) per table line, in order; ``prior_a``/``prior_b``: the
    a-priori seconds of a line as ``a + b * size``. The session tells it how many lines are
    done (:meth:`observe`, with the time); it answers :meth:`eta` and :meth:`now_doing`."""

    def __init__(
        self,
        lines: list[tuple[str, int]],
        prior_a: float,
        prior_b: float,
        run_dir: Path | None = None,
    ) -> None:
        self.lines = lines
        # where rank 0's heartbeat says when the first point began (the ranks' start-up
        # is then not counted as the first line's time)
        self.run_dir = run_dir
        self.first_start: float | None = None
        self.prior_a = prior_a
        self.prior_b = prior_b
        self.done = 0
        self.last_end: float | None = None  # when the latest line was seen done
        self.took: dict[int, float] = {}  # line -> seconds (the first line: start-up too)

    @classmethod
    def for_plan(
        cls, plan: Any, ranks: int, device: str, cores: int, run_dir: Path | None = None
    ) -> SweepForecast:
        kind = "cuda" if device == "cuda" else "cpu"
        per_line = _calls(plan) * len(plan.placements) * _turns(kind, ranks, cores)
        a, b = per_line * LATENCY_S[kind], per_line / (FORECAST_GBPS[kind] * 1e9)
        return cls(plan_lines(plan), a, b, run_dir)

    def _first_point_started(self, now: float) -> float | None:
        """When rank 0 began the first point (its heartbeat), on this clock."""
        if self.first_start is None and self.run_dir is not None:
            beat = read_heartbeats(self.run_dir).get(0)
            if beat is not None and beat.index == 0:  # later points: too late to tell
                self.first_start = now - max(time.time() - beat.at, 0.0)
        return self.first_start

    # -- what happened ----------------------------------------------------------------
    def observe(self, done: int, now: float) -> None:
        """``done`` lines are complete at ``now`` (monotonic seconds)."""
        done = min(done, len(self.lines))
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
                took = spent * guess[i] / whole
                self.took[i] = took
        self.done, self.last_end = done, now

    # -- the model --------------------------------------------------------------------
    def _fit(self, op: str) -> tuple[float, float, int, float] | None:
        """``op``'s fit from its lines done: (a, c, size0, k) for ``a + c * (size /
        size0) ** k`` beyond the largest size done; None before any line.

        ``a``: the line time at its smallest sizes (the calls' latency). ``k``: how the
        size term (the time above ``a``) grows over the largest sizes done, from their
        log-log slope, between 0 and 1 (1: a time per byte, as a path's bandwidth gives;
        less where a loaded host's scheduling, not the bytes, sets the time). Before the
        size term shows above ``a``: the a-priori bandwidth, scaled as the lines done ran
        against the a-priori model."""
        own = sorted((self.lines[i][1], t) for i, t in self.took.items() if self.lines[i][0] == op)
        if not own:
            return None
        small = [t for _, t in own[:3]]
        a = min(statistics.median(small), min(small) * 1.5)
        big = [(size, t - a) for size, t in own[-3:] if size > 0 and t - a > SIZE_TERM_ABOVE * a]
        if len(big) < 2 or big[0][0] == big[-1][0]:
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

    def _scale(self) -> float:
        """What the lines done took against the a-priori model (1 before any)."""
        if not self.took:
            return 1.0
        prior = sum(self._prior(i) for i in self.took)
        return sum(self.took.values()) / prior if prior > 0 else 1.0

    def _prior(self, i: int) -> float:
        return self.prior_a + self.prior_b * self.lines[i][1]

    def line_s(self, i: int) -> float:
        """Seconds line ``i`` takes, as the forecast stands."""
        op, size = self.lines[i]
        fit = self._fit(op)
        if fit is None:
            return self._prior(i) * self._scale()
        a, c, size0, k = fit
        if size <= size0:  # a size done already (another dtype) or below the fit's sizes
            same = [t for j, t in self.took.items() if self.lines[j] == (op, size)]
            if same:
                return statistics.median(same)
            return a + c * (size / size0) if size0 > 0 else a
        return a + c * (size / size0) ** k

    def _model_s(self, i: int) -> float:
        """Line ``i`` as the fit has it (not its own time, where it was measured)."""
        op, size = self.lines[i]
        fit = self._fit(op)
        if fit is None:
            return self._prior(i) * self._scale()
        a, c, size0, k = fit
        return a + c * (size / size0) ** k if size0 > 0 else a

    def _measured_to(self, op: str) -> int:
        return max((self.lines[i][1] for i in self.took if self.lines[i][0] == op), default=0)

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
        """The relative band of :meth:`left_s`; None while it is the a-priori model."""
        if not self.took:
            return None
        # how far the fit as it stands is from the last lines done (their own times)
        recent = sorted(self.took)[-RECENT:]
        pairs = [(self._model_s(i), self.took[i]) for i in recent]
        weight = sum(p for p, _ in pairs)
        missed = sum(abs(t - p) for p, t in pairs) / weight if weight > 0 else 0.5
        # the share of the time left that rests on a bandwidth no point has shown yet
        rest = range(self.done, len(self.lines))
        total = sum(self.line_s(i) for i in rest) or 1.0
        unseen = sum(
            self.line_s(i)
            for i in rest
            if self.lines[i][1] > 4 * max(self._measured_to(self.lines[i][0]), 1)
        )
        return min(max(missed + UNSEEN_BAND * unseen / total, BAND_MIN), BAND_MAX)

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
