"""The shared timing-and-checking harness, as nccl-tests' BenchTime: warm up, time, check.

Backends only launch and time; statistics and bandwidths are computed here once, so
every backend's rows mean the same thing.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpulane.collectives.backends.base import Backend
from gpulane.collectives.pattern import count_wrong, fill_inputs
from gpulane.collectives.spec import Point


@dataclass(frozen=True)
class Timing:
    warmup: int = 5
    iters: int = 20
    check_iters: int = 1
    graph: bool = False
    graph_launches: int = 10


@dataclass
class Measurement:
    """One rank's view of one point."""

    times_s: list[float]  # per operation: per iteration, or per graph replay in graph mode
    wrong: int | None  # None when not checked
    mean_s: float | None = None  # from an uninstrumented loop, where the backend has one


def measure(
    backend: Backend,
    point: Point,
    in_place: bool,
    timing: Timing,
    corrupt: bool = False,
    skip: bool = False,
) -> Measurement:
    """Warm up, time, then check one point on this rank.

    ``corrupt`` flips one received element before the check: a self-test that the
    check finds real errors. ``skip`` leaves out this rank's first collective (a warm-up
    one, else the check's), as a rank with a bug in its schedule does: its peers then
    wait inside the collective library, which only the watchdog can end.
    """
    bufs = backend.allocate(point, in_place)
    fill_inputs(backend.ops, point, backend.rank, bufs.send, bufs.recv)

    op = backend.prepare(point, bufs)

    for _ in range(timing.warmup - (1 if skip and timing.warmup else 0)):
        op()
    backend.synchronize()
    backend.control.barrier()
    mean: float | None = None
    if timing.graph:
        times = backend.time_graph(op, timing.iters, timing.graph_launches)
    else:
        # The mean comes from a loop with nothing between the calls (what nccl-tests
        # reports); percentiles from a second loop timed call by call.
        if backend.on_device:
            mean = backend.time_mean(op, timing.iters)
            backend.control.barrier()
        times = backend.time_loop(op, timing.iters)
    backend.control.barrier()

    wrong: int | None = None
    if timing.check_iters > 0:
        wrong = 0
        for _ in range(timing.check_iters):
            fill_inputs(backend.ops, point, backend.rank, bufs.send, bufs.recv)
            backend.synchronize()
            backend.control.barrier()
            if not (skip and timing.warmup == 0):
                op()
            backend.synchronize()
            if corrupt and point.counts.recv > 0:
                backend.ops.write(bufs.recv, 0, backend.ops.arange(99, 100))
            wrong += count_wrong(backend.ops, point, backend.rank, bufs.recv)
    return Measurement(times, wrong, mean)


@dataclass(frozen=True)
class Summary:
    time_us: float
    time_us_p50: float
    time_us_p99: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), like numpy's default."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(point: Point, per_rank: list[Measurement]) -> Summary:
    """Combine all ranks' measurements as nccl-tests does.

    The reported time is the mean over ranks of each rank's mean time; percentiles are
    over iterations of the slowest rank in each iteration (nccl-tests' -I report).
    """
    means = [
        m.mean_s if m.mean_s is not None else statistics.fmean(m.times_s)
        for m in per_rank
        if m.times_s
    ]
    mean_s = statistics.fmean(means) if means else 0.0
    n_iter = min((len(m.times_s) for m in per_rank), default=0)
    slowest = [max(m.times_s[i] for m in per_rank) for i in range(n_iter)]
    alg, bus = point.spec.bandwidth(point.size_bytes, mean_s, point.nranks)
    wrongs = [m.wrong for m in per_rank]
    wrong = None if any(w is None for w in wrongs) else sum(w for w in wrongs if w is not None)
    return Summary(
        time_us=mean_s * 1e6,
        time_us_p50=percentile(slowest, 50) * 1e6,
        time_us_p99=percentile(slowest, 99) * 1e6,
        algbw_gbps=alg,
        busbw_gbps=bus,
        wrong=wrong,
    )
