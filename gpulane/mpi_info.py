"""Which MPI a version string belongs to, and what to install: pure text, shared by the
mpirun launcher (which starts MPI) and the mpi4py backend (which runs on it)."""

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
