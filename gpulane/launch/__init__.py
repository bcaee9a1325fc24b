"""How ranks come to exist: local processes, Slurm via submitit, mpirun; rank discovery."""
