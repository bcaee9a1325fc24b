"""NCCL called directly through nccl4py, on torch device buffers, on the current stream.

Calls go to nccl4py's low-level bindings with addresses resolved once per call, so the
Python cost per collective is a few attribute lookups: that is what lets plain and graph
mode approach nccl-tests' latency. Results and agreement travel over a gloo group beside
NCCL (as in the torch backend), and the unique id over that group's store.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from gpulane.collectives.backends import cuda_timing
from gpulane.collectives.backends.base import (
    RECV,
    SEND,
    Backend,
    Buffers,
    backend_options,
    cannot_run,
)
from gpulane.collectives.backends.nccl_bootstrap import import_nccl4py, over_store
from gpulane.collectives.backends.nccl_calls import NCCL_CALLS, nccl_calls
from gpulane.collectives.backends.nccl_memory import NcclArenas, memory_options, ncclmem_arenas
from gpulane.collectives.backends.torch_common import TorchControl, TorchOps, init_method
from gpulane.collectives.spec import DTYPES, Point
from gpulane.collectives.values import Array
from gpulane.errors import MissingComponent
from gpulane.rank import RankContext

NCCL_CANNOT = {
    **cannot_run(("gather", "scatter"), None, "backend nccl does not run {op}"),
    # NCCL gives no defined result when alltoall or send/recv buffers overlap.
    **cannot_run(("alltoall", "sendrecv"), True, "{op} in place has no defined result in NCCL"),
}


class NcclBackend(Backend):
    name = "nccl"
    calls = NCCL_CALLS
    cannot = NCCL_CANNOT

    def __init__(self, ctx: RankContext, device: str = "auto", timeout_s: float = 300.0) -> None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError as err:
            raise MissingComponent("backend=nccl needs torch with CUDA") from err
        if device == "cpu" or not torch.cuda.is_available():
            raise MissingComponent("backend=nccl needs GPUs; use backend=torch on CPUs")
        nccl_core, self.b = import_nccl4py()
        self.torch = torch
        self.rank = ctx.rank
        self.world_size = ctx.world_size
        self.on_device = True
        torch.cuda.set_device(ctx.local_rank)
        self.device = torch.device("cuda", ctx.local_rank)
        dist.init_process_group(
            "gloo",
            rank=ctx.rank,
            world_size=ctx.world_size,
            init_method=init_method(ctx),
            timeout=timedelta(seconds=timeout_s),
        )
        self.dist = dist
        self.control = TorchControl(dist, dist.group.WORLD)
        self.ops = TorchOps(torch, self.device)
        store = dist.distributed_c10d._get_default_store()
        uid = over_store(store, ctx.rank, lambda: bytes(nccl_core.get_unique_id()))
        self.comm = nccl_core.Communicator.init(
            nranks=ctx.world_size, rank=ctx.rank, unique_id=nccl_core.UniqueId.from_bytes(uid)
        )
        self._handle = self.comm._comm  # the bindings take the raw communicator
        self._nccl_core = nccl_core
        self.memory, self.register = memory_options(backend_options(ctx.run_dir))
        self.arenas: NcclArenas | None = None

    def reserve(self, points: list[Point]) -> None:
        if self.memory == "nccl" and points:
            comm = self._handle if self.register else None
            self.arenas = ncclmem_arenas(self.torch, self.device, points, self.rank, comm)

    def row_extra(self) -> dict[str, object]:
        return {"memory": self.memory, "registered": self.register}

    def empty(self, n: int, dtype: str) -> Array:
        return self.torch.empty(
            n, dtype=getattr(self.torch, DTYPES[dtype].torch_name), device=self.device
        )

    def launch(self, point: Point, bufs: Buffers) -> None:
        self.prepare(point, bufs)()

    def prepare(self, point: Point, bufs: Buffers) -> Callable[[], None]:
        """Everything but the stream resolved once: the timed call is one binding call."""
        addr = {SEND: bufs.send.data_ptr(), RECV: bufs.recv.data_ptr()}
        resolved = [
            (getattr(self.b, c.fn), tuple(addr[a] if isinstance(a, str) else a for a in c.args))
            for c in nccl_calls(point, self.rank)
        ]
        handle, index = self._handle, self.device.index
        # The raw current stream (the capture stream inside a CUDA graph), without
        # building a torch Stream object per call.
        current = getattr(self.torch._C, "_cuda_getCurrentRawStream", None) or (
            lambda i: self.torch.cuda.current_stream(i).cuda_stream
        )
        if len(resolved) == 1:
            ((fn, args),) = resolved

            def one() -> None:
                fn(*args, handle, current(index))

            return one
        start, end = self.b.group_start, self.b.group_end

        def grouped() -> None:
            stream = current(index)
            start()
            for fn, args in resolved:
                fn(*args, handle, stream)
            end()

        return grouped

    def synchronize(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def time_loop(self, fn: Callable[[], None], iters: int) -> list[float]:
        return cuda_timing.time_loop(self.torch, self.device, fn, iters)

    def time_mean(self, fn: Callable[[], None], iters: int) -> float:
        return cuda_timing.time_mean(self.torch, self.device, fn, iters)

    def time_graph(self, fn: Callable[[], None], iters: int, launches: int) -> list[float]:
        return cuda_timing.time_graph(
            self.torch, self.device, fn, iters, launches, self.control.barrier
        )

    def versions(self) -> dict[str, str]:
        v = {"torch": str(self.torch.__version__), "cuda": str(self.torch.version.cuda)}
        try:
            code = int(self.b.get_version())
            v["nccl"] = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        except Exception:
            pass
        try:
            import nccl.core

            v["nccl4py"] = str(nccl.core.__version__)
        except Exception:
            pass
        v["gpu"] = self.torch.cuda.get_device_name(self.device)
        return v

    def close(self) -> None:
        try:
            self.torch.cuda.synchronize(self.device)
            if self.arenas is not None:
                self.arenas.free()
            self.comm.destroy()
        finally:
            if self.dist.is_initialized():
                self.dist.destroy_process_group()
