"""The environment variables that shape a result (NCCL_*, ...), kept on every row: which
are kept, and which gpulane or a launcher set themselves and are left out."""

from __future__ import annotations

import os

ENV_PREFIXES = (
    "NCCL_",
    "TORCH_NCCL",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "GLOO_",
    "OMPI_MCA",
    "UCX_",
)


# Set by installers, launchers and gpulane's own scripts; they do not shape a result.
ENV_IGNORED = {"NCCL_TESTS_HOME", "NCCL_VERSION", "NCCL_HOME"}
# mpirun's own bookkeeping (OMPI_MCA_mpi_oversubscribe, which does shape timings, stays).
ENV_IGNORED_PREFIXES = (
    "OMPI_MCA_orte_",
    "OMPI_MCA_ess",
    "OMPI_MCA_pmix",
    "OMPI_MCA_initial_wdir",
    "OMPI_MCA_shmem_RUNTIME_QUERY_hint",
)


# Names the variables gpulane set for the ranks itself (NCCL_DEBUG for the transport
# capture, rundir.nccl_capture_env): they do not shape a result the user chose.
GPULANE_SET_ENV = "GPULANE_SET_ENV"


def shaping_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables that shape a result (NCCL_*, ...), for the rows; those
    gpulane set itself (named in GPULANE_SET_ENV) are left out."""
    env = dict(os.environ) if env is None else env
    ours = {k.strip() for k in env.get(GPULANE_SET_ENV, "").split(",") if k.strip()}
    return {
        k: v
        for k, v in sorted(env.items())
        if k.startswith(ENV_PREFIXES)
        and k not in ENV_IGNORED
        and k not in ours
        and not k.startswith(ENV_IGNORED_PREFIXES)
    }
