"""Per-rank collective backends behind one interface (:mod:`.base`): torch.distributed
(:mod:`.torch_dist`), NCCL through nccl4py (:mod:`.nccl`) and MPI through mpi4py
(:mod:`.mpi`). Each declares the call it makes for every collective it runs."""
