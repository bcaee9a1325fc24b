"""Which MPI a version string names (what mpirun --version and MPI_Get_library_version say)."""

from __future__ import annotations

from gpulane.mpi_info import mpi_flavor


def test_flavor_from_version_text() -> None:
    assert mpi_flavor("mpirun (Open MPI) 4.1.4\n\nReport bugs to ...") == "Open MPI"
    assert mpi_flavor("Open MPI v4.1.6, package: Debian OpenMPI") == "Open MPI"
    assert mpi_flavor("HYDRA build details:\n    Version: 4.1.2") == "MPICH"
    assert mpi_flavor("MPICH Version: 4.2.0") == "MPICH"
    assert mpi_flavor("Intel(R) MPI Library for Linux* OS, Version 2021.10") == "Intel MPI"
    assert mpi_flavor("MVAPICH2 Version 2.3.7") == "MVAPICH"
    assert mpi_flavor("SomeMPI 1.0\nsecond line") == "SomeMPI 1.0"
    assert mpi_flavor("   ") == "unknown"
