"""The collective backends' settings (conf/backend): torch.distributed, NCCL through
nccl4py, the user's nccl-tests build, mpi4py, and ``auto`` (the default: nccl on GPUs when
nccl4py is there, else torch), which the front resolves before anything starts."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TorchBackendConfig:
    name: str = "torch"
    memory: str = "torch"  # torch (caching allocator) or nccl (ncclMemAlloc)


@dataclass
class NcclBackendConfig:
    name: str = "nccl"
    memory: str = "nccl"
    register: bool = False
    loop: str = "auto"  # auto (c where it builds), c or python: what issues the timed loop
    stream: str = "own"  # own (non-blocking, as nccl-tests) or current (torch's)


@dataclass
class AutoBackendConfig:
    """Resolved by the front (session.backend_choice) to nccl or torch; never saved. Its
    options go to the backend chosen: memory to either (None: that backend's default),
    the others to nccl only."""

    name: str = "auto"
    memory: str | None = None
    register: bool = False
    loop: str = "auto"
    stream: str = "own"


@dataclass
class NcclTestsBackendConfig:
    name: str = "nccl_tests"
    home: str | None = None
    extra_args: list[str] = field(default_factory=list)
    use_json: str = "auto"  # auto, true, false
    per_iter: bool = False


@dataclass
class MpiBackendConfig:
    name: str = "mpi"
    buffers: str = "auto"  # auto, device, host
    array: str = "auto"  # auto, torch, cupy


BACKENDS = {
    "auto": AutoBackendConfig,
    "torch": TorchBackendConfig,
    "nccl": NcclBackendConfig,
    "nccl_tests": NcclTestsBackendConfig,
    "mpi": MpiBackendConfig,
}
