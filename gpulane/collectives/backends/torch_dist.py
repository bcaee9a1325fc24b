"""torch.distributed backend: NCCL on GPUs, gloo on CPUs.

torch's API is in-place for all_reduce, broadcast and reduce and out-of-place for
alltoall and sendrecv, so only those placements are measured for them (the table
shows n/a for the other); all_gather and reduce_scatter run both ways, in-place
through views into one buffer exactly as nccl-tests lays them out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from gpulane.collectives.backends import cuda_timing
from gpulane.collectives.backends.base import Backend, Buffers, backend_options, cannot_run
from gpulane.collectives.backends.nccl_memory import NcclArenas, memory_options, ncclmem_arenas
from gpulane.collectives.backends.torch_common import (
    TorchControl,
    TorchOps,
    cpu_threads,
    init_method,
)
from gpulane.collectives.spec import DTYPES, Point
from gpulane.collectives.values import Array
from gpulane.errors import InputError, MissingComponent
from gpulane.rank import RankContext

IN_PLACE_ONLY = ("all_reduce", "broadcast", "reduce")

TorchCall = Callable[["TorchBackend", Point, Buffers], object]


def _sendrecv(b: TorchBackend, point: Point, bufs: Buffers) -> None:
    dist, n = b.dist, b.world_size
    works = dist.batch_isend_irecv(
        [
            dist.P2POp(dist.isend, bufs.send, (b.rank + 1) % n),
            dist.P2POp(dist.irecv, bufs.recv, (b.rank - 1) % n),
        ]
    )
    # On GPUs wait() makes the current stream wait (no host block), so the timing
    # events see the transfer finish.
    for w in works:
        w.wait()


# collective -> its torch.distributed call (torch's single-tensor calls work in recv)
TORCH_CALLS: dict[str, TorchCall] = {
    "all_reduce": lambda b, p, bufs: b.dist.all_reduce(bufs.recv, op=b.redops[p.redop]),
    "all_gather": lambda b, p, bufs: b.dist.all_gather_into_tensor(bufs.recv, bufs.send),
    "reduce_scatter": lambda b, p, bufs: b.dist.reduce_scatter_tensor(
        bufs.recv, bufs.send, op=b.redops[p.redop]
    ),
    "alltoall": lambda b, p, bufs: b.dist.all_to_all_single(bufs.recv, bufs.send),
    "broadcast": lambda b, p, bufs: b.dist.broadcast(bufs.recv, src=p.root),
    "reduce": lambda b, p, bufs: b.dist.reduce(bufs.recv, dst=p.root, op=b.redops[p.redop]),
    "sendrecv": _sendrecv,
}

TORCH_CANNOT = {
    **cannot_run(
        ("gather", "scatter"), None, "torch.distributed has no {op} on tensors of one buffer"
    ),
    **cannot_run(("alltoall", "sendrecv"), True, "torch.distributed's {op} is out-of-place only"),
    **cannot_run(IN_PLACE_ONLY, False, "torch.distributed's {op} is in-place only"),
}


class TorchBackend(Backend):
    calls = TORCH_CALLS
    cannot = TORCH_CANNOT

    def __init__(self, ctx: RankContext, device: str = "auto", timeout_s: float = 300.0) -> None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError as err:
            raise MissingComponent(
                "torch is not installed; install it with `pip install 'gpulane[torch]'`"
            ) from err
        self.torch = torch
        self.dist = dist
        use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
        if use_cuda:
            if not torch.cuda.is_available():
                raise MissingComponent("device=cuda but torch sees no GPU; use device=cpu")
            if ctx.local_rank >= torch.cuda.device_count():
                raise MissingComponent(
                    f"rank {ctx.rank} wants GPU {ctx.local_rank} but this host has "
                    f"{torch.cuda.device_count()}; run with fewer ranks"
                )
            torch.cuda.set_device(ctx.local_rank)
            self.device = torch.device("cuda", ctx.local_rank)
            pg_backend = "nccl"
        else:
            self.device = torch.device("cpu")
            torch.set_num_threads(cpu_threads(ctx))
            pg_backend = "gloo"
        self.name = f"torch-{pg_backend}"
        self.on_device = use_cuda
        self.rank = ctx.rank
        self.world_size = ctx.world_size
        kwargs: dict[str, Any] = {"timeout": timedelta(seconds=timeout_s)}
        if use_cuda:
            kwargs["device_id"] = self.device
        dist.init_process_group(
            backend=pg_backend,
            rank=ctx.rank,
            world_size=ctx.world_size,
            init_method=init_method(ctx),
            **kwargs,
        )
        self.memory, register = memory_options(backend_options(ctx.run_dir))
        if register:
            raise InputError("backend.register=true is for backend=nccl (torch registers none)")
        if self.memory == "nccl" and not use_cuda:
            raise InputError("backend.memory=nccl needs GPUs (device=cuda)")
        self.arenas: NcclArenas | None = None
        control_group = dist.new_group(backend="gloo") if use_cuda else dist.group.WORLD
        self.control = TorchControl(dist, control_group)
        self.ops = TorchOps(torch, self.device)
        self.redops: dict[str, Any] = {
            "sum": dist.ReduceOp.SUM,
            "prod": dist.ReduceOp.PRODUCT,
            "max": dist.ReduceOp.MAX,
            "min": dist.ReduceOp.MIN,
            "avg": dist.ReduceOp.AVG,
        }

    # -- buffers and launch ---------------------------------------------------------
    def reserve(self, points: list[Point]) -> None:
        # ncclMemAlloc'd buffers qualify for NCCL's registration of captured buffers in
        # CUDA graphs; the caching allocator's do not (all_gather: 20 % of busbw).
        if self.memory == "nccl" and points:
            self.arenas = ncclmem_arenas(self.torch, self.device, points, self.rank)

    def row_extra(self) -> dict[str, object]:
        return {"memory": self.memory} if self.on_device else {}

    def empty(self, n: int, dtype: str) -> Array:
        return self.torch.empty(
            n, dtype=getattr(self.torch, DTYPES[dtype].torch_name), device=self.device
        )

    def launch(self, point: Point, bufs: Buffers) -> None:
        TORCH_CALLS[point.op](self, point, bufs)

    def allocate(self, point: Point, in_place: bool) -> Buffers:
        bufs = super().allocate(point, in_place)
        if in_place and point.op in IN_PLACE_ONLY:
            # torch's single-tensor API: the send region is the receive region.
            bufs.send = bufs.recv
        return bufs

    # -- timing ---------------------------------------------------------------------
    def synchronize(self) -> None:
        if self.on_device:
            self.torch.cuda.synchronize(self.device)

    def time_loop(self, fn: Callable[[], None], iters: int) -> list[float]:
        if not self.on_device:
            out = []
            for _ in range(iters):
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
            return out
        return cuda_timing.time_loop(self.torch, self.device, fn, iters)

    def time_mean(self, fn: Callable[[], None], iters: int) -> float:
        if not self.on_device:
            return super().time_mean(fn, iters)
        return cuda_timing.time_mean(self.torch, self.device, fn, iters)

    def time_graph(self, fn: Callable[[], None], iters: int, launches: int) -> list[float]:
        if not self.on_device:
            raise NotImplementedError("graph mode needs CUDA (CUDA graphs); set graph=false on CPU")
        return cuda_timing.time_graph(
            self.torch, self.device, fn, iters, launches, self.control.barrier
        )

    def versions(self) -> dict[str, str]:
        v = {"torch": str(self.torch.__version__)}
        if self.on_device:
            try:
                major, minor, patch = self.torch.cuda.nccl.version()[:3]
                v["nccl"] = f"{major}.{minor}.{patch}"
            except Exception:
                pass
            v["cuda"] = str(self.torch.version.cuda)
            v["gpu"] = self.torch.cuda.get_device_name(self.device)
        return v

    def close(self) -> None:
        try:
            if self.arenas is not None:
                self.torch.cuda.synchronize(self.device)
                # torch's communicator may hold them registered from graph capture
                self.dist.destroy_process_group()
                self.arenas.free()
        finally:
            if self.dist.is_initialized():
                self.dist.destroy_process_group()
