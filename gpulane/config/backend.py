"""The collective backends' settings (conf/backend): torch.distributed, NCCL through
nccl4py, the user's nccl-tests build, mpi4py."""

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
    "torch": TorchBackendConfig,
    "nccl": NcclBackendConfig,
    "nccl_tests": NcclTestsBackendConfig,
    "mpi": MpiBackendConfig,
}
