"""What the backends that hold torch tensors share: the checks' tensor operations, the
gloo channel for results, and where rank 0's store listens."""

from __future__ import annotations

import os
from typing import Any

from gpulane.collectives.backends.mpi_rendezvous import init_method as mpi_init_method
from gpulane.collectives.values import Array
from gpulane.rank import RankContext


class TorchOps:
    def __init__(self, torch: Any, device: Any) -> None:
        self.torch = torch
        self.device = device

    def arange(self, lo: int, hi: int) -> Array:
        return self.torch.arange(lo, hi, dtype=self.torch.int64, device=self.device)

    def minimum(self, a: Array, b: Array) -> Array:
        return self.torch.minimum(a, b)

    def maximum(self, a: Array, b: Array) -> Array:
        return self.torch.maximum(a, b)

    def write(self, buf: Array, lo: int, values: Array) -> None:
        buf[lo : lo + values.numel()].copy_(values)

    def zero(self, buf: Array) -> None:
        buf.zero_()

    def count_mismatch(self, buf: Array, lo: int, expected: Array, tol: float) -> int:
        got = buf[lo : lo + expected.numel()].to(self.torch.float64)
        diff = (got - expected.to(self.torch.float64)).abs()
        if tol:
            diff = diff / expected.to(self.torch.float64).abs().clamp(min=1.0)
        return int((diff > tol).sum().item())


class TorchControl:
    """Results travel over a gloo group beside the measured one, so NCCL streams stay clean."""

    def __init__(self, dist: Any, group: Any) -> None:
        self.dist = dist
        self.group = group

    def gather(self, obj: Any) -> list[Any] | None:
        out: list[Any] = [None] * self.dist.get_world_size()
        self.dist.all_gather_object(out, obj, group=self.group)
        return out if self.dist.get_rank() == 0 else None

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        self.dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def barrier(self) -> None:
        self.dist.barrier(group=self.group)


def init_method(ctx: RankContext) -> str:
    """Where rank 0's store listens: from the launcher, or agreed over MPI when mpirun
    started the ranks without MASTER_ADDR (every rank calls this; it may be collective)."""
    agreed = mpi_init_method(ctx.info)
    if agreed is not None:
        return agreed
    addr = ctx.info.master_addr or os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = ctx.info.master_port or int(os.environ.get("MASTER_PORT", "29500"))
    return f"tcp://{addr}:{port}"


def cpu_threads(ctx: RankContext, environ: dict[str, str] | None = None) -> int:
    """Intra-op threads for a gloo rank: ``OMP_NUM_THREADS`` where the user set it, else 1
    when several ranks share the host, as torchrun sets it (its "to avoid your system being
    overloaded"). gloo runs a collective on its own threads; torch's pool only fills and
    checks the buffers, and each rank's pool as wide as the host competed with gloo's: on
    the 16-core host a 4-rank sweep took 18.4 s with it and 10.6 s with 1 thread, and the
    ranging shot told the lines' time only with 1 (benchmarks/cli/README.md). A forked rank
    needs this call: OpenMP read the variable when the fork server imported torch."""
    env = os.environ if environ is None else environ
    given = env.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return 1 if ctx.info.local_world_size > 1 else max(1, os.cpu_count() or 1)
