"""Which MPI a version string names, and what to install when there is none.

Pure text, no mpi4py: the mpirun launcher asks ``mpirun --version`` before any rank
starts, and the MPI backend asks its loaded library; both read the answer here.
"""

from __future__ import annotations

MPI_HINT = "Debian: apt-get install openmpi-bin libopenmpi-dev; elsewhere load your MPI module"
INSTALL_HINT = f"install an MPI library ({MPI_HINT}) and mpi4py (pip install mpi4py)"


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
