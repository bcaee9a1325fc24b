"""The collective backends' settings (conf/backend): torch.distributed, NCCL through
nccl4py, the user's nccl-tests build, mpi4py, and ``auto`` (the default: nccl on GPUs when
nccl4py is there, else torch), which the front resolves before anything starts."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TorchBackendConfig:
    """torch.distributed: NCCL on GPUs, gloo on CPUs."""

    name: str = "torch"
    """Internal: the option's name"""
    memory: str = "torch"  # torch (caching allocator) or nccl (ncclMemAlloc)
    """GPU buffers from torch (its caching allocator) or nccl (ncclMemAlloc, faster in graphs)"""


@dataclass
class NcclBackendConfig:
    """NCCL called directly through nccl4py on device buffers, nccl-tests' numbers (GPUs)."""

    name: str = "nccl"
    """Internal: the option's name"""
    memory: str = "nccl"
    """Buffers from nccl (ncclMemAlloc, as nccl-tests) or torch (its caching allocator)"""
    register: bool = False
    """Also ncclCommRegister the buffers (as nccl-tests -R 1); needs memory=nccl"""
    loop: str = "auto"  # auto (c where it builds), c or python: what issues the timed loop
    """What issues the timed loop: c (a small C loop built at run time), python, auto (c where it builds)"""
    stream: str = "own"  # own (non-blocking, as nccl-tests) or current (torch's)
    """own: a non-blocking stream, as nccl-tests; current: torch's current stream"""


@dataclass
class AutoBackendConfig:
    """nccl on GPUs when nccl4py is installed, else torch; chosen before anything starts.

    Resolved by the front (session.backend_choice) to nccl or torch; never saved. Its
    options go to the backend chosen: memory to either (None: that backend's default),
    the others to nccl only."""

    name: str = "auto"
    """Internal: the option's name"""
    memory: str | None = None
    """Passed to the backend chosen: nccl or torch buffers (null: that backend's default)"""
    register: bool = False
    """Passed to backend=nccl: also ncclCommRegister the buffers"""
    loop: str = "auto"
    """Passed to backend=nccl: c, python or auto"""
    stream: str = "own"
    """Passed to backend=nccl: own or current"""


@dataclass
class NcclTestsBackendConfig:
    """Your own nccl-tests build (all_reduce_perf, ...), driven and read by gpulane."""

    name: str = "nccl_tests"
    """Internal: the option's name"""
    home: str | None = None
    """Where the binaries are (and home/build); null: $NCCL_TESTS_HOME, then PATH"""
    extra_args: list[str] = field(default_factory=list)
    """Appended to every nccl-tests command line, e.g. [-R,1]"""
    use_json: str = "auto"  # auto, true, false
    """Read -J JSON (full precision): auto (when the binary has it), true (require) or false"""
    per_iter: bool = False
    """-I 1 per-iteration timing where supported (gives time_us_p99); not with graph=true"""


@dataclass
class MpiBackendConfig:
    """mpi4py: MPI collectives; start the ranks with launcher=mpirun (or under srun)."""

    name: str = "mpi"
    """Internal: the option's name"""
    buffers: str = "auto"  # auto, device, host
    """device (CUDA-aware MPI), host (numpy) or auto (device when the MPI library takes them)"""
    array: str = "auto"  # auto, torch, cupy
    """Device arrays from torch, cupy or auto (torch, else CuPy)"""


BACKENDS = {
    "auto": AutoBackendConfig,
    "torch": TorchBackendConfig,
    "nccl": NcclBackendConfig,
    "nccl_tests": NcclTestsBackendConfig,
    "mpi": MpiBackendConfig,
}
