"""The MPI library under mpi4py: loading it, naming it, and whether it takes CUDA buffers.

Asked once per run by the MPI backend before it chooses host or device buffers; a rank
that fails alone takes the whole job down (:func:`abort_on_exit`) instead of leaving its
peers in MPI_Finalize.
"""

from __future__ import annotations

import atexit
import ctypes
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from gpulane.errors import MissingComponent
from gpulane.mpi_info import INSTALL_HINT, MPI_HINT, mpi_flavor


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
