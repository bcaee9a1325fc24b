"""The ranging shot: before a sweep's first point, each collective makes a few timed calls
at its smallest size and at a few of its largest sizes, so that the live ETA
(``session/estimate``) knows how the large sizes go before the small ones are done.

A doubling sweep spends most of its time on its last few sizes, and the first points
cannot tell how those go: on a loaded 2-core host a gloo line's time jumped tenfold
between 128 KiB and 256 KiB and then grew as about size^0.3 (benchmarks/cli/README.md).
Four calls (the median of the last three timed) at the smallest and largest sizes, and at
sizes halfway and three quarters up the range of sizes (in log), and two fills and checks
on at most 4 MiB, cost little against the sweep: the largest line alone makes warm-up + iters + check calls per
placement, 26 by default, with two fills and a check. Measured: 3.1-11.5 % of a sweep's
wall time on the shared 2-core machine (benchmarks/cli/README.md, 2026-12-02 13:44 UTC),
most where the sweep is short or its ranks share the cores.

The ranging calls are no rows and no measurement: their buffers are the sweep's own and
their results are dropped; for the points after them they act as extra warm-up at most.
Rank 0 writes each call's seconds to ``.heartbeat/ranging`` (JSON Lines, read by the
forecast) and a note for the log (``# ranging: all_reduce 8 MiB 12.3 ms a call``).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.collectives.backends.base import Backend
from gpulane.collectives.pattern import count_wrong, fill_inputs
from gpulane.collectives.spec import plan_point
from gpulane.rank import RankContext
from gpulane.rundir import HEARTBEAT_DIR
from gpulane.units import format_size

RANGING_FILE = "ranging"
# Fewer sizes than this a collective: no ranging (the sweep is short, its own points
# come soon enough, and three ranging sizes would be most of its sizes).
MIN_SIZES = 6
# Where the ranging sizes sit, as shares of the log range of sizes: the top, where most
# of the time is, and two below it, so that a bend in how time grows with size (a
# protocol's switch, a cache's size) falls between two of them.
# The smallest size too: its shot is cheap (a latency) and puts the shot beside the first
# lines done, so that their times calibrate the shots ahead at once (session/estimate).
AT_SHARES = (0.0, 0.5, 0.75, 1.0)
# Calls per ranging size: the first settles the size's buffers and connections, the
# others are timed and their median kept, their spread told (the forecast's band). One
# call timed alone swung by +-40 % on the loaded 2-core machine (8 consecutive 64 MiB
# gloo calls: 67-128 ms, 2026-12-02 13:09 UTC, load 1.4-4.5; /tmp/h4/callexp.py).
CALLS = 4
# The fill and the check are timed on at most this many bytes and scaled to the size: they
# go as the elements (a loop over chunks), and 4 MiB is enough elements (1 Mi floats) that
# their fixed cost is lost in it, few enough to cost little. Timed FILLS times, the least
# kept: the first fill and check of a process carry torch's first-use costs, which the
# scaling multiplies (a 64 MiB all_reduce's shot told 0.84 s to fill and 1.93 s to check,
# 0.28 s and 0.86 s measured at that size; 2026-12-02 13:09 UTC, 2-core VM, load 1.4-4.5).
FILL_AT = 4 << 20
FILLS = 2


def ranging_sizes(sizes: list[int]) -> list[int]:
    """The sizes of ``sizes`` (a plan's, ascending) a ranging shot calls; [] for a sweep
    of fewer than MIN_SIZES sizes."""
    ordered = sorted({int(s) for s in sizes if int(s) > 0})
    if len(ordered) < MIN_SIZES:
        return []
    low, high = math.log(ordered[0]), math.log(ordered[-1])
    picked = []
    for share in AT_SHARES:
        want = low + share * (high - low)
        picked.append(min(ordered, key=lambda s: abs(math.log(s) - want)))
    return sorted(set(picked))


def ranging_path(run_dir: Path) -> Path:
    return run_dir / HEARTBEAT_DIR / RANGING_FILE


@dataclass(frozen=True)
class Shot:
    """Rank 0's ranging shot at one size: seconds of a call, of filling the inputs and of
    checking the result, and the placements the collective runs in."""

    call_s: float
    fill_s: float
    check_s: float
    placements: int
    # the timed calls' spread, (max - min) / median; None from a shot of one timed call
    spread: float | None = None

    def line_s(self, timing: Any) -> float:
        """A line's seconds at the shot's pace: in every placement, its calls and, as the
        harness does, one fill, then a fill, a call and a check per checked call."""
        calls = timing.warmup + timing.check_iters
        calls += timing.iters * (timing.graph_launches if timing.graph else 1)
        fills = 1 + timing.check_iters
        one = calls * self.call_s + fills * self.fill_s + timing.check_iters * self.check_s
        return self.placements * one


def _ranging_lines(run_dir: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of rank 0's ranging file, as far as they are written."""
    try:
        text = ranging_path(run_dir).read_text(encoding="utf-8")
    except OSError:
        return
    for line in text.splitlines():
        try:
            one = json.loads(line)
        except ValueError:
            continue  # a line being written
        if isinstance(one, dict):
            yield one


def read_ranging(run_dir: Path) -> dict[tuple[str, int], Shot]:
    """(collective, size) -> its :class:`Shot`, as rank 0 wrote them (complete lines)."""
    out: dict[tuple[str, int], Shot] = {}
    for one in _ranging_lines(run_dir):
        try:
            spread = one.get("spread")
            shot = Shot(float(one["s"]), float(one["fill_s"]), float(one["check_s"]),
                        int(one["placements"]),
                        float(spread) if spread is not None else None)  # fmt: skip
            out[(str(one["op"]), int(one["size"]))] = shot
        except (ValueError, KeyError, TypeError):
            continue  # the shot's closing line, with its cost
    return out


def ranging_ended_at(run_dir: Path) -> float | None:
    """When (``time.time()``) rank 0's ranging shot ended, None before it has."""
    for one in _ranging_lines(run_dir):
        if "ended_at" in one:
            return float(one["ended_at"])
    return None


def wants_ranging(cfg: Any) -> bool:
    """Ranging helps only a forecast someone reads: not with progress=false, not when a
    run is resumed (its heartbeats start afresh, its early points are done already)."""
    return bool(cfg.progress) and not bool(cfg.resume)


def range_sweep(backend: Backend, plan: Any, ctx: RankContext, allowance: Any) -> None:
    """Every rank: one ranging shot per collective of ``plan`` (its first dtype, the first
    placement the backend runs); rank 0 writes the seconds. ``allowance(point)``: the
    watchdog's extra time for a point (the sweep's own rule)."""
    sizes = ranging_sizes(list(plan.sizes))
    if not sizes:
        return
    dtype = plan.dtypes[0]
    began = time.monotonic()
    for op in plan.collectives:
        filled: dict[int, tuple[float, float]] = {}  # size -> its fill's and check's seconds
        for size in reversed(sizes):  # the largest first: the figure that matters most
            point = plan_point(op, size, dtype, plan.redop, max(plan.root, 0), ctx.world_size)
            places = [ip for ip in plan.placements if backend.supports(point, ip) is None]
            if not places or point.size_bytes <= 0:
                continue
            # index 0, so that the watchdog allows the point's time (a start-up beat
            # would not); the forecast tells it from the first point by its label
            ctx.heartbeat(0, f"ranging {op} {format_size(size)}", allowance(point))
            call_s, spread = _call_s(backend, point, places[0])
            # the fill and the check go as the elements: timed on at most FILL_AT bytes
            at = min(size, FILL_AT)
            if at not in filled:
                small = plan_point(op, at, dtype, plan.redop, max(plan.root, 0), ctx.world_size)
                filled[at] = _fill_check_s(backend, small, places[0])
            fill_s, check_s = (t * size / at for t in filled[at])
            if ctx.is_leader:
                _report(ctx, op, size, Shot(call_s, fill_s, check_s, len(places), spread))
    if ctx.is_leader:  # what the shot cost the sweep, for the log (and the benchmark)
        took = time.monotonic() - began
        with open(ranging_path(ctx.run_dir), "a", encoding="utf-8") as fh:
            # its end (wall clock) is when the first point began: a forecast whose polls
            # missed the first point's beat (fast points) times its first lines from it
            fh.write(json.dumps({"took_s": took, "ended_at": time.time()}) + "\n")
        ctx.note(f"# ranging: done in {took:.1f} s, before the first point (no rows)")


def _call_s(backend: Backend, point: Any, in_place: bool) -> tuple[float, float]:
    """The median seconds of the CALLS - 1 calls after the first, every rank starting them
    together, and their spread ((max - min) / median). The buffers
    are zeroed, not filled: a call's time does not depend on the values (zeros are no
    denormals), and a fill of the largest size costs more than its calls on a CPU."""
    bufs = backend.allocate(point, in_place)
    backend.ops.zero(bufs.send)
    backend.ops.zero(bufs.recv)
    call = backend.prepare(point, bufs)
    backend.synchronize()
    backend.control.barrier()
    times = sorted(float(t) for t in backend.time_loop(call, CALLS)[1:])
    backend.control.barrier()
    mid = statistics.median(times)
    return mid, (times[-1] - times[0]) / mid if mid > 0 else 0.0


def _fill_check_s(backend: Backend, point: Any, in_place: bool) -> tuple[float, float]:
    """Seconds to fill the inputs and to check the result, as a line does around its
    calls (the check's count dropped: nothing was called). At large sizes on a CPU they
    take longer than the calls: on the 2-core machine (2026-12-02, load 3-5) a 64 MiB
    gloo line took 7 s wall for 26 calls of 84 ms."""
    bufs = backend.allocate(point, in_place)
    backend.control.barrier()
    fills, checks = [], []
    for _ in range(FILLS):
        began = time.perf_counter()
        fill_inputs(backend.ops, point, backend.rank, bufs.send, bufs.recv)
        backend.synchronize()
        fills.append(time.perf_counter() - began)
        began = time.perf_counter()
        count_wrong(backend.ops, point, backend.rank, bufs.recv)
        backend.synchronize()
        checks.append(time.perf_counter() - began)
    backend.control.barrier()
    return min(fills), min(checks)


def _report(ctx: RankContext, op: str, size: int, shot: Shot) -> None:
    path = ranging_path(ctx.run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "op": op,
        "size": size,
        "s": shot.call_s,
        "fill_s": shot.fill_s,
        "check_s": shot.check_s,
        "placements": shot.placements,
        "spread": shot.spread,
    }
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    ctx.note(
        f"# ranging: {op} {format_size(size)} {_ms(shot.call_s)} ms a call "
        f"({_ms(shot.fill_s + shot.check_s)} ms to fill and check)"
    )


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"
