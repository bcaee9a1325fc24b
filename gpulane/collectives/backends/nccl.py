"""NCCL called directly through nccl4py, on torch device buffers, on a stream of its own.

Every argument of a point's calls is bound once (nccl_loop): the timed loop is the NCCL
calls and nothing else, issued from a small C loop (``backend.loop=c``, what nccl-tests
does) or from Python through nccl4py's low-level bindings (``backend.loop=python``). As in
nccl-tests the calls go to a non-blocking stream of the backend's own
(``backend.stream=own``), which is also torch's current stream for the rank, so that fills,
checks and timing events are ordered with them; ``backend.stream=current`` keeps torch's
current stream (the legacy default stream). Results and agreement travel over a gloo group
beside NCCL (as in the torch backend), and the unique id over that group's store.
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
from gpulane.collectives.backends.nccl_calls import NCCL_CALLS, NcclCall, nccl_calls
from gpulane.collectives.backends.nccl_loop import (
    LOOPS,
    CLoop,
    LoopLibrary,
    driver_event_record,
    library,
    missing_symbols,
    nccl4py_symbols,
    python_loop,
)
from gpulane.collectives.backends.nccl_memory import NcclArenas, memory_options, ncclmem_arenas
from gpulane.collectives.backends.torch_common import TorchControl, TorchOps, init_method
from gpulane.collectives.spec import DTYPES, Point
from gpulane.collectives.values import Array
from gpulane.errors import InputError, MissingComponent
from gpulane.rank import RankContext

STREAMS = ("own", "current")

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
        self._handle = self.comm._comm  # the bindings take nccl4py's Comm object
        self._nccl_core = nccl_core
        opts = backend_options(ctx.run_dir)
        self.memory, self.register = memory_options(opts)
        self.loop_asked, self.stream_kind = issue_options(opts)
        self.arenas: NcclArenas | None = None
        if self.stream_kind == "own":
            # As nccl-tests: a non-blocking stream (torch's pool makes them so), current for
            # the rank so that fills, checks and events are ordered with the calls.
            self.stream = torch.cuda.Stream(self.device)
            torch.cuda.set_stream(self.stream)
        else:
            self.stream = torch.cuda.current_stream(self.device)
        self._stream = int(self.stream.cuda_stream)
        self.loop, self._lib, why = self._choose_loop()
        if why:
            ctx.note(f"# backend.loop=auto: issuing from Python ({why})")

    def _choose_loop(self) -> tuple[str, LoopLibrary | None, str | None]:
        """(python or c, the C loop's library, why auto fell back to Python)."""
        if self.loop_asked == "python":
            return "python", None, None
        try:
            lib = library()
            self._symbols = nccl4py_symbols()
            self._comm_ptr = int(getattr(self._handle, "handle", 0) or 0)
            if not self._comm_ptr:
                raise MissingComponent("nccl4py's communicator shows no handle")
            # Every symbol resolved now: a missing one is found before the first point.
            absent = missing_symbols(self._symbols)
            if absent:
                raise MissingComponent(f"the loaded libnccl has no {', '.join(absent)}")
            # 0 (no libcuda found): the events are recorded from Python around repeat(n)
            self._record = driver_event_record()
        except (MissingComponent, OSError, ImportError) as err:
            if self.loop_asked == "c":
                raise
            return "python", None, str(err)
        return "c", lib, None

    def reserve(self, points: list[Point]) -> None:
        if self.memory == "nccl" and points:
            comm = self._handle if self.register else None
            self.arenas = ncclmem_arenas(self.torch, self.device, points, self.rank, comm)

    def row_extra(self) -> dict[str, object]:
        return {
            "memory": self.memory,
            "registered": self.register,
            "loop": self.loop,
            "stream": self.stream_kind,
        }

    def empty(self, n: int, dtype: str) -> Array:
        return self.torch.empty(
            n, dtype=getattr(self.torch, DTYPES[dtype].torch_name), device=self.device
        )

    def launch(self, point: Point, bufs: Buffers) -> None:
        self.prepare(point, bufs)()

    def prepare(self, point: Point, bufs: Buffers) -> Callable[[], None]:
        """The point's calls with every argument bound: calling the result issues one
        operation; its ``repeat(n)``, where it has one, issues n back to back."""
        calls = bound_calls(point, self.rank, bufs)
        if self._lib is not None:
            return CLoop(
                self._lib,
                calls,
                self._symbols,
                self._comm_ptr,
                self._stream,
                self.b.get_error_string,
                self._record,
            )
        return python_loop(
            [(getattr(self.b, c.fn), c.args) for c in calls],
            self._handle,
            self._stream,
            (self.b.group_start, self.b.group_end),
        )

    def synchronize(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def time_loop(self, fn: Callable[[], None], iters: int) -> list[float]:
        return cuda_timing.time_loop(self.torch, self.device, fn, iters)

    def time_mean(self, fn: Callable[[], None], iters: int) -> float:
        return cuda_timing.time_mean(self.torch, self.device, fn, iters)

    def time_graph(self, fn: Callable[[], None], iters: int, launches: int) -> list[float]:
        return cuda_timing.time_graph(
            self.torch, self.device, fn, iters, launches, self.control.barrier, self.stream
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


def issue_options(opts: dict[str, object]) -> tuple[str, str]:
    """backend.loop and backend.stream, checked."""
    loop = str(opts.get("loop") or "auto").lower()
    if loop not in LOOPS:
        raise InputError(f"backend.loop: expected auto, python or c, got {loop!r}")
    stream = str(opts.get("stream") or "own").lower()
    if stream not in STREAMS:
        raise InputError(f"backend.stream: expected own or current, got {stream!r}")
    return loop, stream


def bound_calls(point: Point, rank: int, bufs: Buffers) -> list[NcclCall]:
    """The point's calls with the buffers' device addresses in place of SEND and RECV."""
    addr = {SEND: int(bufs.send.data_ptr()), RECV: int(bufs.recv.data_ptr())}
    return [
        NcclCall(c.fn, tuple(addr[a] if isinstance(a, str) else a for a in c.args))
        for c in nccl_calls(point, rank)
    ]
