"""The mpirun launcher (Open MPI's mpirun, MPICH's and Intel MPI's mpiexec)."""
