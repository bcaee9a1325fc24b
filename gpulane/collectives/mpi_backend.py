"""MPI backend: the same collectives through mpi4py.

Host buffers are numpy arrays, timed with ``MPI.Wtime`` around each call after a
barrier. Where the MPI library is CUDA-aware and the ranks have GPUs, buffers are
torch CUDA tensors (or CuPy arrays), passed to mpi4py through DLPack /
``__cuda_array_interface__`` and timed with CUDA events; otherwise GPU ranks use host
buffers, and rank 0 says so.

MPI's placements, mapped onto nccl-tests' buffer layouts (:meth:`Backend.allocate`):

- all_reduce, all_gather, alltoall: ``MPI_IN_PLACE`` in the receive buffer, exactly
  nccl-tests' layout (all_gather takes each rank's input from its slot).
- reduce_scatter: ``MPI_IN_PLACE`` takes the input from the whole buffer and leaves the
  result at its start (not at the rank's slot as NCCL does); allocate() says so.
- reduce, gather, scatter: ``MPI_IN_PLACE`` at the root; the other ranks send from
  (or receive into) nccl-tests' in-place region.
- broadcast: MPI_Bcast is in place by nature; out-of-place is not measured (n/a).
- sendrecv: out-of-place is MPI_Sendrecv, in-place MPI_Sendrecv_replace.

Not run: avg (MPI has no averaging reduction); bfloat16 on host buffers (numpy has no
such type); half and bfloat16 reductions where the MPI library has no such type (Open
MPI 4.1 has none): half and bfloat16 all_gather, alltoall, broadcast and sendrecv move
16-bit words and do run.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpulane.collectives.backend import Backend, Buffers, backend_options
from gpulane.collectives.pattern import Array
from gpulane.collectives.spec import DTYPES, Point
from gpulane.errors import GpulaneError, InputError, MissingComponent
from gpulane.rank import RankContext

NAME = "mpi"
REDUCING = {"all_reduce", "reduce_scatter", "reduce"}
IN_PLACE_ONLY = {"broadcast"}
REDOPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN"}
HALF_TYPES = {"half": "FLOAT16_T", "bfloat16": "BFLOAT16_T"}

# nccl-tests dtype -> MPI datatype that moves it (16-bit floats move as 16-bit words)
WIRE_TYPES = {
    "int8": "INT8_T",
    "uint8": "UINT8_T",
    "int32": "INT32_T",
    "uint32": "UINT32_T",
    "int64": "INT64_T",
    "uint64": "UINT64_T",
    "half": "UINT16_T",
    "float": "FLOAT",
    "double": "DOUBLE",
    "bfloat16": "UINT16_T",
}

MPI_HINT = "Debian: apt-get install openmpi-bin libopenmpi-dev; elsewhere load your MPI module"
INSTALL_HINT = f"install an MPI library ({MPI_HINT}) and mpi4py (pip install mpi4py)"


# -- arrays ---------------------------------------------------------------------------
class ArrayModuleOps:
    """The checks' array operations for numpy (host buffers) or CuPy (device buffers)."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp

    def arange(self, lo: int, hi: int) -> Array:
        return self.xp.arange(lo, hi, dtype=self.xp.int64)

    def minimum(self, a: Array, b: Array) -> Array:
        return self.xp.minimum(a, b)

    def maximum(self, a: Array, b: Array) -> Array:
        return self.xp.maximum(a, b)

    def write(self, buf: Array, lo: int, values: Array) -> None:
        buf[lo : lo + values.shape[0]] = values

    def zero(self, buf: Array) -> None:
        buf.fill(0)

    def count_mismatch(self, buf: Array, lo: int, expected: Array, tol: float) -> int:
        xp = self.xp
        got = buf[lo : lo + expected.shape[0]].astype(xp.float64)
        want = expected.astype(xp.float64)
        diff = xp.abs(got - want)
        if tol:
            diff = diff / xp.maximum(xp.abs(want), 1.0)
        return int((diff > tol).sum())


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


@dataclass
class MpiBuffers(Buffers):
    in_place: bool = False


# -- the MPI library --------------------------------------------------------------------
def import_mpi() -> Any:
    """mpi4py's MPI module (initialises MPI), or one clear error saying what is missing."""
    try:
        from mpi4py import MPI
    except ImportError as err:
        text = str(err)
        if getattr(err, "name", None) == "mpi4py" or "No module named" in text:
            raise MissingComponent(
                f"mpi4py is not installed: pip install mpi4py (it needs an MPI library: {MPI_HINT})"
            ) from err
        raise MissingComponent(
            f"mpi4py cannot load its MPI library ({text.splitlines()[0]}): mpi4py was built "
            "against an MPI that is not installed here; "
            f"{INSTALL_HINT}, or rebuild mpi4py against the MPI you have "
            "(env MPICC=$(which mpicc) pip install --no-binary mpi4py --force-reinstall mpi4py)"
        ) from err
    except RuntimeError as err:  # mpi4py's MPI-ABI wheel found no libmpi
        first = str(err).strip().splitlines()
        raise MissingComponent(
            f"mpi4py found no MPI library ({'; '.join(first[:2])}): {INSTALL_HINT}"
        ) from err
    return MPI


def library_version(mpi: Any) -> str:
    """First line of MPI_Get_library_version, e.g. 'Open MPI v4.1.4, package: ...'."""
    text = str(mpi.Get_library_version()).strip()
    return text.splitlines()[0].split(",")[0].strip() if text else "unknown MPI"


def mpi_flavor(text: str) -> str:
    """Open MPI, MPICH, Intel MPI, MVAPICH or the text itself, from a version string."""
    low = text.lower()
    if "open mpi" in low or "openrte" in low or "open rte" in low:
        return "Open MPI"
    if "intel" in low:
        return "Intel MPI"
    if "mvapich" in low:
        return "MVAPICH"
    if "mpich" in low or "hydra" in low:
        return "MPICH"
    return text.strip().splitlines()[0] if text.strip() else "unknown"


def loaded_libmpi() -> list[str]:
    """Paths of the MPI libraries mapped into this process (mpi4py loads them privately)."""
    found: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.rsplit(None, 1)[-1]
                if re.search(r"/lib(mpi|mpich|mpi_ibm|mpi_cray)\.so", path) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def ompi_built_with_cuda(ompi_info: str | None = None) -> bool | None:
    """What ompi_info says about CUDA support (None when it cannot be asked)."""
    exe = ompi_info or shutil.which("ompi_info")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, "--parsable", "--all"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_ompi_cuda(out)


def parse_ompi_cuda(text: str) -> bool | None:
    values = re.findall(
        r"(?m)^mca:(?:mpi|opal):base:param:\w*built_with_cuda_support:value:(\w+)", text
    )
    if not values:
        return None
    return any(v.lower() == "true" for v in values)


@dataclass(frozen=True)
class CudaSupport:
    aware: bool | None  # None: the library cannot be asked
    how: str  # what was asked


def cuda_support(mpi: Any) -> CudaSupport:
    """Whether the running MPI library accepts CUDA device buffers."""
    query = getattr(mpi, "Query_cuda_support", None)
    if callable(query):
        try:
            return CudaSupport(bool(query()), "MPI.Query_cuda_support()")
        except Exception:
            pass
    for path in loaded_libmpi():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        fn = getattr(lib, "MPIX_Query_cuda_support", None)
        if fn is not None:
            fn.restype = ctypes.c_int
            fn.argtypes = []
            return CudaSupport(bool(fn()), "MPIX_Query_cuda_support()")
        fn = getattr(lib, "MPIX_GPU_query_support", None)
        if fn is not None:  # MPICH 4: MPIX_GPU_SUPPORT_CUDA is 0
            out = ctypes.c_int(0)
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
            if fn(0, ctypes.byref(out)) == 0:
                return CudaSupport(bool(out.value), "MPIX_GPU_query_support(CUDA)")
    if mpi_flavor(library_version(mpi)) == "Open MPI":
        built = ompi_built_with_cuda()
        if built is not None:
            return CudaSupport(built, "ompi_info mpi_built_with_cuda_support")
    return CudaSupport(None, "the MPI library has no CUDA query")


_abort_code: list[int] = []


def _abort_at_exit() -> None:
    """Take the whole MPI job down instead of waiting in MPI_Finalize for lost peers."""
    if not _abort_code:
        return
    try:
        from mpi4py import MPI

        if MPI.Is_initialized() and not MPI.Is_finalized():
            sys.stderr.flush()
            sys.stdout.flush()
            MPI.COMM_WORLD.Abort(_abort_code[0])
    except Exception:
        pass


def abort_on_exit(code: int) -> None:
    """A rank that fails alone must not hang in MPI_Finalize: abort the job at exit."""
    if not _abort_code:
        atexit.register(_abort_at_exit)
        _abort_code.append(code)


# -- the backend ------------------------------------------------------------------------
class MpiBackend(Backend):
    name = NAME

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
        self.gpu: _Gpu | None = None
        if device != "cpu" and buffers != "host":
            self.gpu = _Gpu.open(ctx, array, required=device == "cuda")

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
        if isinstance(ranks, int) and not isinstance(ranks, bool) and ranks != size:
            if rank != 0:  # every rank finds this alike: rank 0 alone says it, once
                raise SystemExit(InputError.exit_code)
            raise InputError(
                f"world size mismatch: the configuration says ranks={ranks} but MPI started "
                f"{size} ranks; start {ranks} (mpirun -np {ranks}) or set ranks={size} "
                "(or ranks=auto)"
            )

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

    def supports(self, point: Point, in_place: bool) -> str | None:
        if point.op in REDUCING and point.redop == "avg":
            return "MPI has no averaging reduction (redop=avg); use sum, prod, min or max"
        if point.op in IN_PLACE_ONLY and not in_place:
            return "MPI_Bcast is in-place only"
        if point.dtype == "bfloat16" and self.gpu is None:
            return (
                "numpy has no bfloat16, so host buffers cannot hold it; use dtype=half or float, "
                "or device buffers with a CUDA-aware MPI"
            )
        if point.dtype == "bfloat16" and self.gpu is not None and not self.gpu.has_bfloat16:
            return f"{self.gpu.kind} has no bfloat16; use backend.array=torch"
        if point.op in REDUCING and point.dtype in HALF_TYPES:
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
    def _types(self, point: Point) -> tuple[Any, bool]:
        """(MPI datatype, whether buffers move as 16-bit words)."""
        mpi = self.MPI
        if point.op in REDUCING and point.dtype in HALF_TYPES:
            return getattr(mpi, HALF_TYPES[point.dtype]), False
        return getattr(mpi, WIRE_TYPES[point.dtype]), point.dtype in HALF_TYPES

    def _msg(self, buf: Array, mtype: Any, as_words: bool) -> list[Any]:
        if as_words:
            buf = self.gpu.words(buf) if self.gpu is not None else buf.view(self.np.uint16)
        return [buf, mtype]

    def launch(self, point: Point, bufs: Buffers) -> None:
        try:
            self._launch(point, bufs)
        except self.MPI.Exception as err:
            text = err.Get_error_string() if hasattr(err, "Get_error_string") else str(err)
            if point.op in REDUCING and point.dtype in HALF_TYPES:
                raise InputError(
                    f"{self.library} cannot reduce {point.dtype} ({text.strip()})"
                ) from err
            raise

    def _launch(self, point: Point, bufs: Buffers) -> None:
        mpi, comm, op = self.MPI, self.comm, point.op
        mtype, words = self._types(point)
        in_place = bool(getattr(bufs, "in_place", False))
        send = self._msg(bufs.send, mtype, words)
        recv = self._msg(bufs.recv, mtype, words)
        here = mpi.IN_PLACE
        root = point.root
        is_root = self.rank == root
        redop = getattr(mpi, REDOPS[point.redop]) if op in REDUCING else None
        if op == "all_reduce":
            comm.Allreduce(here if in_place else send, recv, op=redop)
        elif op == "all_gather":
            comm.Allgather(here if in_place else send, recv)
        elif op == "reduce_scatter":
            if in_place:  # input and result both in the whole (send) region
                comm.Reduce_scatter_block(here, send, op=redop)
            else:
                comm.Reduce_scatter_block(send, recv, op=redop)
        elif op == "alltoall":
            comm.Alltoall(here if in_place else send, recv)
        elif op == "broadcast":
            comm.Bcast(recv, root=root)
        elif op == "reduce":
            if in_place:
                comm.Reduce(
                    here if is_root else recv, recv if is_root else None, op=redop, root=root
                )
            else:
                comm.Reduce(send, recv if is_root else None, op=redop, root=root)
        elif op == "gather":
            if in_place and is_root:
                comm.Gather(here, recv, root=root)
            else:
                comm.Gather(send, recv if is_root else None, root=root)
        elif op == "scatter":
            if in_place and is_root:
                comm.Scatter(send, here, root=root)
            else:
                comm.Scatter(send if is_root else None, recv, root=root)
        elif op == "sendrecv":
            n = self.world_size
            dest, source = (self.rank + 1) % n, (self.rank - 1) % n
            if in_place:
                comm.Sendrecv_replace(recv, dest=dest, sendtag=7, source=source, recvtag=7)
            else:
                comm.Sendrecv(send, dest=dest, sendtag=7, recvbuf=recv, source=source, recvtag=7)
        else:
            raise ValueError(op)

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


# -- device buffers -----------------------------------------------------------------------
class _Gpu:
    """One rank's GPU: torch CUDA tensors (or CuPy arrays) and CUDA events."""

    def __init__(self, kind: str, mod: Any, index: int) -> None:
        self.kind = kind
        self.mod = mod
        self.index = index
        if kind == "torch":
            from gpulane.collectives.torch_backend import TorchOps

            self.device = mod.device("cuda", index)
            self.ops: Any = TorchOps(mod, self.device)
            self.has_bfloat16 = True
        else:
            self.ops = ArrayModuleOps(mod)
            self.has_bfloat16 = False

    @classmethod
    def open(cls, ctx: RankContext, array: str, required: bool) -> _Gpu | None:
        """This rank's GPU, selected; None when there is none and none is required."""
        kinds = ["torch", "cupy"] if array == "auto" else [array]
        errors: list[str] = []
        for kind in kinds:
            try:
                mod = __import__(kind)
            except ImportError:
                errors.append(f"{kind} is not installed")
                continue
            try:
                count = (
                    int(mod.cuda.device_count())
                    if kind == "torch" and mod.cuda.is_available()
                    else (int(mod.cuda.runtime.getDeviceCount()) if kind == "cupy" else 0)
                )
            except Exception as err:
                errors.append(f"{kind} sees no GPU ({str(err).strip().splitlines()[0]})")
                continue
            if count == 0:
                errors.append(f"{kind} sees no GPU")
                continue
            if ctx.local_rank >= count:
                raise MissingComponent(
                    f"rank {ctx.rank} wants GPU {ctx.local_rank} but this host has {count}; "
                    "run with fewer ranks per host"
                )
            if kind == "torch":
                mod.cuda.set_device(ctx.local_rank)
            else:
                mod.cuda.Device(ctx.local_rank).use()
            return cls(kind, mod, ctx.local_rank)
        if required:
            raise MissingComponent(
                f"device=cuda but no GPU here ({'; '.join(errors)}); use device=cpu"
            )
        return None

    def empty(self, n: int, dtype: str) -> Array:
        dt = DTYPES[dtype]
        if self.kind == "torch":
            return self.mod.empty(n, dtype=getattr(self.mod, dt.torch_name), device=self.device)
        if dt.numpy_name is None:
            raise InputError(f"CuPy has no {dtype}; use backend.array=torch")
        return self.mod.empty(n, dtype=dt.numpy_name)

    def words(self, buf: Array) -> Array:
        """The same memory as 16-bit integers, for 16-bit floats that MPI only moves."""
        if self.kind == "torch":
            return buf.view(self.mod.int16)
        return buf.view(self.mod.uint16)

    def synchronize(self) -> None:
        if self.kind == "torch":
            self.mod.cuda.synchronize(self.device)
        else:
            self.mod.cuda.Device(self.index).synchronize()

    def time_loop(self, fn: Callable[[], None], iters: int) -> list[float]:
        if self.kind == "torch":
            cuda = self.mod.cuda
            events = [cuda.Event(enable_timing=True) for _ in range(iters + 1)]
            events[0].record()
            for i in range(iters):
                fn()
                events[i + 1].record()
            cuda.synchronize(self.device)
            return [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(iters)]
        cuda = self.mod.cuda
        evs = [cuda.Event() for _ in range(iters + 1)]
        evs[0].record()
        for i in range(iters):
            fn()
            evs[i + 1].record()
        evs[-1].synchronize()
        return [cuda.get_elapsed_time(evs[i], evs[i + 1]) / 1e3 for i in range(iters)]

    def versions(self) -> dict[str, str]:
        mod = self.mod
        if self.kind == "torch":
            return {
                "torch": str(mod.__version__),
                "cuda": str(mod.version.cuda),
                "gpu": str(mod.cuda.get_device_name(self.device)),
            }
        props = mod.cuda.runtime.getDeviceProperties(self.index)
        name = props.get("name", b"")
        return {
            "cupy": str(mod.__version__),
            "cuda": str(mod.cuda.runtime.runtimeGetVersion()),
            "gpu": name.decode() if isinstance(name, bytes) else str(name),
        }
