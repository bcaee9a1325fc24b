"""MPI backend: the same collectives through mpi4py.

Host buffers are numpy arrays, timed with ``MPI.Wtime`` around each call after a
barrier. Where the MPI library is CUDA-aware and the ranks have GPUs, buffers are
torch CUDA tensors (or CuPy arrays), passed to mpi4py through DLPack /
``__cuda_array_interface__`` and timed with CUDA events; otherwise GPU ranks use host
buffers, and rank 0 says so. How each collective maps onto MPI's calls and placements is
:mod:`gpulane.collectives.backends.mpi_calls`.

Not run: avg (MPI has no averaging reduction); bfloat16 on host buffers (numpy has no
such type); half and bfloat16 reductions where the MPI library has no such type (Open
MPI 4.1 has none): half and bfloat16 all_gather, alltoall, broadcast and sendrecv move
16-bit words and do run.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from gpulane.collectives.backends.base import Backend, Buffers, backend_options, cannot_run
from gpulane.collectives.backends.mpi_buffers import ArrayModuleOps, Gpu, MpiBuffers
from gpulane.collectives.backends.mpi_calls import (
    HALF_TYPES,
    MPI_CALLS,
    REDOPS,
    MpiArgs,
    reduces_half,
    wire_type,
)
from gpulane.collectives.backends.mpi_library import (
    CudaSupport,
    abort_on_exit,
    cuda_support,
    import_mpi,
    library_version,
)
from gpulane.collectives.spec import COLLECTIVES, DTYPES, Point
from gpulane.collectives.values import Array
from gpulane.errors import GpulaneError, InputError
from gpulane.rank import RankContext

NAME = "mpi"
MPI_CANNOT = cannot_run(("broadcast",), False, "MPI_Bcast is in-place only")
NO_AVG = "MPI has no averaging reduction (redop=avg); use sum, prod, min or max"
NO_HOST_BFLOAT16 = (
    "numpy has no bfloat16, so host buffers cannot hold it; use dtype=half or float, "
    "or device buffers with a CUDA-aware MPI"
)


class MpiControl:
    """Results and agreement over a communicator of their own, beside the measured one."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm

    def gather(self, obj: Any) -> list[Any] | None:
        out = self.comm.gather(obj, root=0)
        return list(out) if out is not None else None

    def broadcast(self, obj: Any) -> Any:
        return self.comm.bcast(obj, root=0)

    def barrier(self) -> None:
        self.comm.Barrier()


# -- the backend ------------------------------------------------------------------------
class MpiBackend(Backend):
    name = NAME
    calls = MPI_CALLS
    cannot = MPI_CANNOT

    def __init__(self, ctx: RankContext, device: str = "auto", timeout_s: float = 300.0) -> None:
        self.rank = ctx.rank
        self.world_size = ctx.world_size
        self.timeout_s = timeout_s
        opts = backend_options(ctx.run_dir)
        buffers = str(opts.get("buffers") or "auto").lower()
        if buffers not in ("auto", "device", "host"):
            raise InputError(f"backend.buffers: expected auto, device or host, got {buffers!r}")
        array = str(opts.get("array") or "auto").lower()
        if array not in ("auto", "torch", "cupy"):
            raise InputError(f"backend.array: expected auto, torch or cupy, got {array!r}")
        device = str(device).lower()

        # A GPU per rank is chosen before MPI_Init, as CUDA-aware MPI libraries expect.
        self.gpu: Gpu | None = None
        if device != "cpu" and buffers != "host":
            self.gpu = Gpu.open(ctx, array, required=device == "cuda")

        self.MPI = MPI = import_mpi()
        self.library = library_version(MPI)
        self._check_world(ctx, MPI, opts.get("_ranks"))
        world = MPI.COMM_WORLD
        self.comm = world.Dup()
        self._control_comm = world.Dup()
        self.control = MpiControl(self._control_comm)

        support = cuda_support(MPI) if self.rank == 0 else None
        support = self.control.broadcast(support)
        self.cuda_aware: bool | None = support.aware if support is not None else None
        self.note = self._choose_buffers(ctx, device, buffers, support)
        if self.gpu is not None:
            self.ops: Any = self.gpu.ops
            self.on_device = True
        else:
            import numpy

            self.np = numpy
            self.ops = ArrayModuleOps(numpy)
            self.on_device = False
        if self.note:
            ctx.note(f"# mpi: {self.note}")

    # -- setup ------------------------------------------------------------------------
    def _check_world(self, ctx: RankContext, mpi: Any, ranks: Any) -> None:
        size = mpi.COMM_WORLD.Get_size()
        rank = mpi.COMM_WORLD.Get_rank()
        launcher = ctx.info.launcher
        if size != ctx.world_size or rank != ctx.rank:
            if size == 1 and launcher not in ("mpirun", "slurm"):
                raise InputError(
                    f"backend=mpi needs ranks started by MPI, but {launcher} started these "
                    f"{ctx.world_size} processes and MPI sees each alone; add launcher=mpirun, "
                    "or start gpulane with mpirun / srun --mpi=pmix"
                )
            if size == 1 and launcher == "slurm":
                raise InputError(
                    f"srun started {ctx.world_size} tasks but {self.library} sees each alone: "
                    "start them with srun --mpi=pmix (Debian's Open MPI needs PMIx) or export "
                    "SLURM_MPI_TYPE=pmix"
                )
            if size == 1:
                raise InputError(
                    f"mpirun started {ctx.world_size} ranks but mpi4py's MPI ({self.library}) "
                    "sees each alone: mpi4py is built against another MPI than the mpirun that "
                    "started it; use that MPI's own mpirun, or rebuild mpi4py against it "
                    "(env MPICC=$(which mpicc) pip install --no-binary mpi4py --force-reinstall "
                    "mpi4py)"
                )
            raise InputError(
                f"the launcher's variables say rank {ctx.rank} of {ctx.world_size} but MPI says "
                f"rank {rank} of {size}: mpi4py's MPI ({self.library}) is not the MPI that "
                "started this job; use one MPI for both"
            )
        check_ranks(ranks, size, rank)

    def _choose_buffers(
        self, ctx: RankContext, device: str, buffers: str, support: CudaSupport | None
    ) -> str:
        assert support is not None
        aware = support.aware
        if self.gpu is None:
            said = {True: "CUDA-aware", False: "not CUDA-aware", None: "CUDA support unknown"}
            where = "device=cpu" if device == "cpu" else "backend.buffers=host"
            if device != "cpu" and buffers != "host":
                where = "no GPU"
            return f"{self.library} ({said[aware]}, {support.how}): {where}, host (numpy) buffers"
        if aware is None and buffers == "device":
            return (
                f"{self.library}: CUDA support unknown ({support.how}); device buffers as "
                f"asked (backend.buffers=device), {self.gpu.kind} tensors"
            )
        if aware:
            return (
                f"{self.library} is CUDA-aware ({support.how}): device buffers "
                f"({self.gpu.kind} on GPU {self.gpu.index}), timed with CUDA events"
            )
        why = "is not CUDA-aware" if aware is False else f"has unknown CUDA support ({support.how})"
        if buffers == "device":
            raise InputError(
                f"backend.buffers=device but {self.library} {why} ({support.how}); use "
                "backend.buffers=auto (host buffers) or a CUDA-aware MPI build"
            )
        self.gpu = None
        return (
            f"{self.library} {why} ({support.how}): host (numpy) buffers from GPU ranks, "
            "timed with MPI_Wtime"
        )

    # -- buffers ------------------------------------------------------------------------
    def empty(self, n: int, dtype: str) -> Array:
        if self.gpu is not None:
            return self.gpu.empty(n, dtype)
        np_name = DTYPES[dtype].numpy_name
        if np_name is None:
            raise InputError(f"numpy has no {dtype}; host buffers cannot hold it")
        return self.np.empty(n, dtype=np_name)

    @classmethod
    def input_problem(cls, op: str, dtype: str, redop: str, host_buffers: bool) -> str | None:
        if COLLECTIVES[op].reduces and redop == "avg":
            return NO_AVG
        if dtype == "bfloat16" and host_buffers:
            return NO_HOST_BFLOAT16
        return None

    def supports(self, point: Point, in_place: bool) -> str | None:
        if point.spec.reduces and point.redop == "avg":
            return NO_AVG
        why = super().supports(point, in_place)
        if why is not None:
            return why
        if point.dtype == "bfloat16" and self.gpu is None:
            return NO_HOST_BFLOAT16
        if point.dtype == "bfloat16" and self.gpu is not None and not self.gpu.has_bfloat16:
            return f"{self.gpu.kind} has no bfloat16; use backend.array=torch"
        if reduces_half(point):
            t = getattr(self.MPI, HALF_TYPES[point.dtype], None)
            if t is None or t == self.MPI.DATATYPE_NULL:
                return f"{self.library} has no {point.dtype} reductions"
        return None

    def allocate(self, point: Point, in_place: bool) -> Buffers:
        c = point.counts
        if in_place and point.op == "reduce_scatter":
            # MPI_IN_PLACE: input in the whole buffer, this rank's result at its start.
            whole = self.empty(max(c.send, 1), point.dtype)
            return MpiBuffers(whole[: c.send], whole[: c.recv], [whole], True)
        b = super().allocate(point, in_place)
        return MpiBuffers(b.send, b.recv, b.storage, in_place)

    # -- one collective ---------------------------------------------------------------
    def _msg(self, buf: Array, mtype: Any, as_words: bool) -> list[Any]:
        if as_words:
            buf = self.gpu.words(buf) if self.gpu is not None else buf.view(self.np.uint16)
        return [buf, mtype]

    def launch(self, point: Point, bufs: Buffers) -> None:
        self.prepare(point, bufs)()

    def prepare(self, point: Point, bufs: Buffers) -> Callable[[], None]:
        """The call and its arguments resolved once: the timed call is one mpi4py call."""
        mpi = self.MPI
        mtype, words = wire_type(mpi, point)
        args = MpiArgs(
            comm=self.comm,
            here=mpi.IN_PLACE,
            send=self._msg(bufs.send, mtype, words),
            recv=self._msg(bufs.recv, mtype, words),
            in_place=bool(getattr(bufs, "in_place", False)),
            root=point.root,
            is_root=self.rank == point.root,
            redop=getattr(mpi, REDOPS[point.redop]) if point.spec.reduces else None,
            rank=self.rank,
            nranks=self.world_size,
        )
        call = MPI_CALLS[point.op]

        def run() -> None:
            try:
                call(args)
            except mpi.Exception as err:
                text = err.Get_error_string() if hasattr(err, "Get_error_string") else str(err)
                if reduces_half(point):
                    raise InputError(
                        f"{self.library} cannot reduce {point.dtype} ({text.strip()})"
                    ) from err
                raise

        return run

    # -- timing -------------------------------------------------------------------------
    def synchronize(self) -> None:
        if self.gpu is not None:
            self.gpu.synchronize()

    def time_loop(self, fn: Callable[[], None], iters: int) -> list[float]:
        if self.gpu is not None:
            self.gpu.synchronize()
            self.comm.Barrier()
            return self.gpu.time_loop(fn, iters)
        wtime = self.MPI.Wtime
        self.comm.Barrier()
        out = []
        for _ in range(iters):
            t0 = wtime()
            fn()
            out.append(wtime() - t0)
        return out

    def versions(self) -> dict[str, str]:
        import mpi4py

        v = {
            "mpi": self.library,
            "mpi4py": str(mpi4py.__version__),
            "mpi_buffers": "device" if self.gpu is not None else "host",
            "mpi_cuda_aware": {True: "yes", False: "no", None: "unknown"}[self.cuda_aware],
        }
        if self.gpu is not None:
            v.update(self.gpu.versions())
        else:
            v["numpy"] = str(self.np.__version__)
        return v

    def close(self) -> None:
        if sys.exc_info()[1] is not None and self.world_size > 1:
            err = sys.exc_info()[1]
            abort_on_exit(err.exit_code if isinstance(err, GpulaneError) else 1)
        for comm in (self.comm, self._control_comm):
            with contextlib.suppress(Exception):
                comm.Free()


def check_ranks(ranks: Any, size: int, rank: int) -> None:
    """``ranks=N`` against the ``size`` ranks MPI started: refused when they differ. Every
    rank finds this alike: rank 0 alone says it, once; the others leave with its status.
    Also called before torch and mpi4py are imported (from the ranks' own variables, see
    :func:`gpulane.session.sweep.in_process`), so a wrong ``-np`` costs no MPI start."""
    if isinstance(ranks, int) and not isinstance(ranks, bool) and ranks != size:
        if rank != 0:
            raise SystemExit(InputError.exit_code)
        raise InputError(
            f"world size mismatch: the configuration says ranks={ranks} but MPI started "
            f"{size} ranks; start {ranks} (mpirun -np {ranks}) or set ranks={size} "
            "(or ranks=auto)"
        )
