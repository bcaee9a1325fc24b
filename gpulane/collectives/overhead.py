"""What torch.distributed adds per call, measured in the run itself (torch_overhead=true,
on by default when backend=auto chose nccl on GPUs).

After the sweep, in the same ranks and on the same buffers, all_reduce in place at 8 B and
1 MiB is timed through backend=nccl (its timed loop, as in the sweep) and through
torch.distributed's NCCL (a process group made beside the backend's gloo one), taking
turns, three rounds. The figure per size is the median over rounds of torch's mean time
minus nccl's, each the mean over ranks, as the sweep reports time. Rank 0 writes the
numbers to ``torch_overhead.json`` in the run directory; the summary prints the line.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpulane.collectives.backends.base import Backend, Buffers
from gpulane.collectives.harness import Timing
from gpulane.collectives.spec import plan_point
from gpulane.units import format_size

OVERHEAD_FILE = "torch_overhead.json"
SIZES = (8, 1 << 20)
ROUNDS = 3


def measure_torch_overhead(
    backend: Any, timing: Timing, run_dir: Path, group_backend: str = "nccl"
) -> dict[str, Any] | None:
    """Time both sides (see the module's text); rank 0 writes and returns the numbers.

    ``backend`` is the run's backend (NcclBackend) with torch.distributed initialized:
    its dist, empty, prepare, time_mean and control are used. ``group_backend``: the
    process group torch's side runs on (nccl; gloo where a test has no GPU).
    """
    dist = backend.dist
    group = dist.new_group(backend=group_backend)  # torch.distributed's own communicator
    try:
        sizes = []
        for size in SIZES:
            point = plan_point("all_reduce", size, "float", "sum", 0, backend.world_size)
            buf = backend.empty(point.counts.recv, point.dtype)
            buf.zero_()
            sides: dict[str, Callable[[], None]] = {
                "nccl": backend.prepare(point, Buffers(buf, buf, [buf])),
                "torch": _torch_all_reduce(dist, buf, group),
            }
            means: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(ROUNDS):
                for name, fn in sides.items():
                    means[name].append(_mean_over_ranks(backend, fn, timing))
            sizes.append(_figures(size, means))
        backend.synchronize()
    finally:
        dist.destroy_process_group(group)
    if backend.rank != 0:
        return None
    result = {
        "op": "all_reduce",
        "dtype": "float",
        "in_place": True,
        "rounds": ROUNDS,
        "iters": timing.iters,
        "nccl_loop": getattr(backend, "loop", None),
        "sizes": sizes,
    }
    (Path(run_dir) / OVERHEAD_FILE).write_text(json.dumps(result, indent=1) + "\n")
    return result


def _torch_all_reduce(dist: Any, buf: Any, group: Any) -> Callable[[], None]:
    def call() -> None:
        dist.all_reduce(buf, group=group)

    return call


def _mean_over_ranks(backend: Backend, fn: Callable[[], None], timing: Timing) -> float:
    """Seconds per call, warmed up, two events around the loop, mean over ranks."""
    for _ in range(timing.warmup):
        fn()
    backend.synchronize()
    backend.control.barrier()
    mine = backend.time_mean(fn, timing.iters)
    everyone = backend.control.gather(mine)
    total = backend.control.broadcast(statistics.fmean(everyone) if everyone else None)
    return float(total)


def _figures(size: int, means: dict[str, list[float]]) -> dict[str, Any]:
    added = [t - n for t, n in zip(means["torch"], means["nccl"], strict=True)]
    return {
        "size_bytes": size,
        "nccl_us": [m * 1e6 for m in means["nccl"]],
        "torch_us": [m * 1e6 for m in means["torch"]],
        "added_us": statistics.median(added) * 1e6,
    }


def overhead_line(run_dir: Path | None) -> str | None:
    """The summary's line, from the run directory's torch_overhead.json (None: not there)."""
    if run_dir is None:
        return None
    path = Path(run_dir) / OVERHEAD_FILE
    try:
        data = json.loads(path.read_text())
        parts = [
            f"{s['added_us']:.1f} µs per call at {format_size(int(s['size_bytes']))}"
            if i == 0
            else f"{s['added_us']:.1f} µs at {format_size(int(s['size_bytes']))}"
            for i, s in enumerate(data["sizes"])
        ]
        medians = ", ".join(
            f"{statistics.median(s['torch_us']):.1f} vs {statistics.median(s['nccl_us']):.1f} µs"
            for s in data["sizes"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (
        f"# torch.distributed adds {', '.join(parts)} (this run: all_reduce in place, "
        f"torch vs backend=nccl {medians}, median of {data.get('rounds')} rounds)"
    )
