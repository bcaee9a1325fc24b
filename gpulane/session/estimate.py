"""How long a sweep takes: a floor told before it starts, and a forecast that learns from
the points measured so far.

- :func:`sweep_estimate_s`: every point's calls at a bandwidth the path reaches at best. A
  floor, not a forecast ("at least 0:05:46"), told before the ranks start.
- :class:`SweepForecast`: the live ETA. Before any point is measured it is the a-priori
  model and says so ("rough"). Then each table line's wall time (every placement, the
  warm-up, checked and timed calls, the check itself) is fitted per collective as
  ``a + b * size``: ``a`` from its smallest points, ``b`` (seconds per byte) from the
  largest points done whose size term shows above ``a``, and extrapolated to the sizes
  still to come; a collective not started yet is the a-priori model scaled by what the
  others took against theirs. The band (``±30 %``) is how far the forecast missed the
  lines it predicted before they ran, widened by the share of the time left that still
  rests on the a-priori bandwidth (sizes far above the largest one measured).
"""

from __future__ import annotations

import statistics
from typing import Any

# Best rates per device kind (GB/s) and a call's latency floor (s). CPU: gloo
# between processes of one host (0.4-0.6 GB/s measured on the 2-core test machine; 1.0
# keeps the figure a floor).
RATE_GBPS = {"cpu": 1.0, "cuda": 100.0}
LATENCY_S = {"cpu": 30e-6, "cuda": 8e-6}
# The forecast's a-priori rates, before a point says better: per line byte, the buffers
# are also filled and every element checked (host work at a few GB/s); the band says how
# much of the forecast rests on them.
FORECAST_GBPS = {"cpu": 0.35, "cuda": 50.0}
# A size term counts once it is this many times the fitted latency term: below it, the
# "per byte" time is the latency's noise, and extrapolating it would be a guess.
SIZE_TERM_ABOVE = 0.5
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

    def __init__(self, lines: list[tuple[str, int]], prior_a: float, prior_b: float) -> None:
        self.lines = lines
        self.prior_a = prior_a
        self.prior_b = prior_b
        self.done = 0
        self.last_end: float | None = None  # when the latest line was seen done
        self.took: dict[int, float] = {}  # line -> seconds (the first line: start-up too)
        self.misses: list[tuple[float, float]] = []  # (predicted, took) of lines predicted

    @classmethod
    def for_plan(cls, plan: Any, ranks: int, device: str, cores: int) -> SweepForecast:
        kind = "cuda" if device == "cuda" else "cpu"
        per_line = _calls(plan) * len(plan.placements) * _turns(kind, ranks, cores)
        return cls(
            plan_lines(plan), per_line * LATENCY_S[kind], per_line / (FORECAST_GBPS[kind] * 1e9)
        )

    # -- what happened ----------------------------------------------------------------
    def observe(self, done: int, now: float) -> None:
        """``done`` lines are complete at ``now`` (monotonic seconds)."""
        done = min(done, len(self.lines))
        if done <= self.done:
            if self.last_end is None and done == 0:
                self.last_end = now  # the ranks are starting: the first line's clock
            return
        fresh = range(self.done, done)
        if self.last_end is not None:
            # lines seen done in one poll share its time as the forecast would have split it
            guess = {i: self.line_s(i) for i in fresh}
            whole = sum(guess.values()) or 1.0
            spent = now - self.last_end
            for i in fresh:
                took = spent * guess[i] / whole
                if i > 0:  # the first line holds the ranks' start-up: not a point's time
                    if self.took:
                        self.misses.append((guess[i], took))
                    self.took[i] = took
        self.done, self.last_end = done, now

    # -- the model --------------------------------------------------------------------
    def _fit(self, op: str) -> tuple[float, float] | None:
        """(a, b) of ``op`` from its lines done; None before any."""
        own = sorted((self.lines[i][1], t) for i, t in self.took.items() if self.lines[i][0] == op)
        if not own:
            return None
        small = [t for _, t in own[:3]]
        a = min(statistics.median(small), min(small) * 1.5)
        slopes = [
            (t - a) / size for size, t in own[-3:] if size > 0 and t - a > SIZE_TERM_ABOVE * a
        ]
        b = statistics.median(slopes) if slopes else self.prior_b * self._scale()
        return a, max(b, 0.0)

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
        fit = self._fit(self.lines[i][0])
        if fit is None:
            return self._prior(i) * self._scale()
        a, b = fit
        return a + b * self.lines[i][1]

    def _measured_to(self, op: str) -> int:
        return max((self.lines[i][1] for i in self.took if self.lines[i][0] == op), default=0)

    # -- what it says ----------------------------------------------------------------
    def left_s(self, now: float) -> float:
        """Seconds left: the lines after the current one, and what the current one still
        takes (a line past its forecast is taken to need as long again as it has run)."""
        if self.done >= len(self.lines):
            return 0.0
        rest = [self.line_s(i) for i in range(self.done, len(self.lines))]
        if self.done == 0 or self.last_end is None:  # starting: no point running yet
            return sum(rest)
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
        recent = self.misses[-RECENT:]  # the forecast as it stands, not its first guesses
        weight = sum(p for p, _ in recent)
        missed = sum(abs(t - p) for p, t in recent) / weight if weight > 0 else 0.5
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
