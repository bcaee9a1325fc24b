"""Device-side timing with CUDA events, shared by the GPU backends.

Events are recorded on the current stream between operations, so each interval is
what the GPU spent, not what Python spent launching (except where launching is slower
than the GPU, which is then what the interval shows, as in nccl-tests).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def time_loop(torch: Any, device: Any, fn: Callable[[], None], iters: int) -> list[float]:
    """Seconds per call for ``iters`` back-to-back calls of fn."""
    cuda = torch.cuda
    events = [cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    fn()  # aligns the ranks on the device (see time_mean)
    events[0].record()
    for i in range(iters):
        fn()
        events[i + 1].record()
    cuda.synchronize(device)
    return [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(iters)]


def time_mean(torch: Any, device: Any, fn: Callable[[], None], iters: int) -> float:
    """Mean seconds per call, two events around the whole loop (nccl-tests' plain timing).

    A call that has ``timed(n, start, end)`` (backend=nccl's C loop) issues all of it
    itself, events included, so that nothing but the calls lies between the events; one
    that has ``repeat(n)`` issues the loop; otherwise the loop is Python's.
    """
    cuda = torch.cuda
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    timed = getattr(fn, "timed", None)
    if timed is not None:
        start.record()  # torch creates an event when it is first recorded
        end.record()
        timed(iters, start.cuda_event, end.cuda_event)
        cuda.synchronize(device)
        return float(start.elapsed_time(end)) / 1e3 / iters
    repeat = getattr(fn, "repeat", None)
    # One untimed call first: the start event then fires when that collective ends, at
    # the same moment on every rank. Without it the first timed call also waits out the
    # ranks' skew after the host barrier (tens of us over gloo), which at 1 MiB (15 us
    # per call, 20 calls) is a tenth of the total.
    fn()
    start.record()
    if repeat is not None:
        repeat(iters)
    else:
        for _ in range(iters):
            fn()
    end.record()
    cuda.synchronize(device)
    return float(start.elapsed_time(end)) / 1e3 / iters


def time_graph(
    torch: Any,
    device: Any,
    fn: Callable[[], None],
    iters: int,
    launches: int,
    barrier: Callable[[], None],
    stream: Any = None,
) -> list[float]:
    """Seconds per call when ``iters`` calls are captured in one CUDA graph and replayed.

    One value per replay (replay time / iters), as nccl-tests' -G divides by launches.
    ``stream``: capture on it (the stream fn's calls are bound to), else on torch's side
    stream for captures.
    """
    cuda = torch.cuda
    graph = cuda.CUDAGraph()
    with cuda.graph(graph, stream=stream):
        for _ in range(iters):
            fn()
    graph.replay()  # the first replay uploads the graph; keep it out of the timing
    cuda.synchronize(device)
    barrier()
    events = [cuda.Event(enable_timing=True) for _ in range(launches + 1)]
    events[0].record()
    for i in range(launches):
        graph.replay()
        events[i + 1].record()
    cuda.synchronize(device)
    del graph
    return [events[i].elapsed_time(events[i + 1]) / 1e3 / iters for i in range(launches)]
