"""The collective backends' settings (conf/backend): torch.distributed, NCCL through
nccl4py, the user's nccl-tests build, mpi4py, and ``auto`` (the default: nccl on GPUs when
nccl4py is there, else torch), which the front resolves before anything starts.

Each option is a subclass of :class:`BackendConfig`; what the rest of gpulane needs to
know about a backend is a property of its class (``needs_mpi``, ``uses_nccl``, ...), never
its name."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulane.config.choices import (
    Array,
    Buffers,
    Loop,
    Memory,
    Stream,
    UseJson,
    check_choices,
)
from gpulane.errors import InputError


@dataclass
class BackendConfig:
    """What every backend option has: its name (the option chosen in conf/backend)."""

    name: str = "???"
    """Internal: the option's name"""

    @property
    def needs_mpi(self) -> bool:
        """The ranks call MPI themselves: they must be started by MPI (mpirun, srun)."""
        return False

    @property
    def uses_nccl(self) -> bool:
        """On GPUs the ranks run NCCL (a preset's NCCL_* variables apply; NCCL's init
        lines name the transport)."""
        return False

    @property
    def needs_gpus(self) -> bool:
        """Runs on GPUs only."""
        return False

    @property
    def gloo_on_cpus(self) -> bool:
        """On CPUs the ranks run torch.distributed's gloo."""
        return False

    @property
    def runs_program(self) -> bool:
        """The ranks run another program (nccl-tests' binaries), not gpulane's harness."""
        return False

    @property
    def chosen_at_start(self) -> bool:
        """An option resolved to another backend before anything starts (auto)."""
        return False

    @property
    def times_torch_beside(self) -> bool:
        """torch_overhead=true can time torch.distributed's all_reduce beside this one."""
        return False

    def validate(self) -> None:
        """One InputError for a value no rank could use."""
        check_choices(self, "backend.")


@dataclass
class TorchBackendConfig(BackendConfig):
    """torch.distributed: NCCL on GPUs, gloo on CPUs."""

    name: str = "torch"
    """Internal: the option's name"""
    memory: Memory = "torch"  # torch (caching allocator) or nccl (ncclMemAlloc)
    """GPU buffers from torch (its caching allocator) or nccl (ncclMemAlloc, faster in graphs)"""

    @property
    def uses_nccl(self) -> bool:
        return True

    @property
    def gloo_on_cpus(self) -> bool:
        return True


@dataclass
class NcclBackendConfig(BackendConfig):
    """NCCL called directly through nccl4py on device buffers, nccl-tests' numbers (GPUs)."""

    name: str = "nccl"
    """Internal: the option's name"""
    memory: Memory = "nccl"
    """Buffers from nccl (ncclMemAlloc, as nccl-tests) or torch (its caching allocator)"""
    register: bool = False
    """Also ncclCommRegister the buffers (as nccl-tests -R 1); needs memory=nccl"""
    loop: Loop = "auto"  # auto (c where it builds), c or python: what issues the timed loop
    """What issues the timed loop: c (a small C loop built at run time), python, auto (c where it builds)"""
    stream: Stream = "own"  # own (non-blocking, as nccl-tests) or current (torch's)
    """own: a non-blocking stream, as nccl-tests; current: torch's current stream"""

    @property
    def uses_nccl(self) -> bool:
        return True

    @property
    def needs_gpus(self) -> bool:
        return True

    @property
    def times_torch_beside(self) -> bool:
        return True

    def validate(self) -> None:
        super().validate()
        check_register(self.register, self.memory)


def check_register(register: bool, memory: str | None) -> None:
    if register and str(memory or "nccl") != "nccl":  # auto's None: nccl's default
        raise InputError("backend.register=true needs backend.memory=nccl")


@dataclass
class AutoBackendConfig(BackendConfig):
    """nccl on GPUs when nccl4py is installed, else torch; chosen before anything starts.

    Resolved by the front (session.backend_choice) to nccl or torch; never saved. Its
    options go to the backend chosen: memory to either (None: that backend's default),
    the others to nccl only."""

    name: str = "auto"
    """Internal: the option's name"""
    memory: Memory | None = None
    """Passed to the backend chosen: nccl or torch buffers (null: that backend's default)"""
    register: bool = False
    """Passed to backend=nccl: also ncclCommRegister the buffers"""
    loop: Loop = "auto"
    """Passed to backend=nccl: c, python or auto"""
    stream: Stream = "own"
    """Passed to backend=nccl: own or current"""

    @property
    def uses_nccl(self) -> bool:
        return True  # whichever it chooses runs NCCL on GPUs

    @property
    def gloo_on_cpus(self) -> bool:
        return True  # torch, on CPUs

    @property
    def chosen_at_start(self) -> bool:
        return True

    def validate(self) -> None:
        super().validate()
        check_register(self.register, self.memory)


@dataclass
class NcclTestsBackendConfig(BackendConfig):
    """Your own nccl-tests build (all_reduce_perf, ...), driven and read by gpulane."""

    name: str = "nccl_tests"
    """Internal: the option's name"""
    home: str | None = None
    """Where the binaries are (and home/build); null: $NCCL_TESTS_HOME, then PATH"""
    extra_args: list[str] = field(default_factory=list)
    """Appended to every nccl-tests command line, e.g. [-R,1]"""
    use_json: UseJson = "auto"  # auto, true, false
    """Read -J JSON (full precision): auto (when the binary has it), true (require) or false"""
    per_iter: bool = False
    """-I 1 per-iteration timing where supported (gives time_us_p99); not with graph=true"""

    @property
    def uses_nccl(self) -> bool:
        return True

    @property
    def needs_gpus(self) -> bool:
        return True

    @property
    def runs_program(self) -> bool:
        return True


@dataclass
class MpiBackendConfig(BackendConfig):
    """mpi4py: MPI collectives; start the ranks with launcher=mpirun (or under srun)."""

    name: str = "mpi"
    """Internal: the option's name"""
    buffers: Buffers = "auto"  # auto, device, host
    """device (CUDA-aware MPI), host (numpy) or auto (device when the MPI library takes them)"""
    array: Array = "auto"  # auto, torch, cupy
    """Device arrays from torch, cupy or auto (torch, else CuPy)"""

    @property
    def needs_mpi(self) -> bool:
        return True


BACKENDS: dict[str, type[BackendConfig]] = {
    "auto": AutoBackendConfig,
    "torch": TorchBackendConfig,
    "nccl": NcclBackendConfig,
    "nccl_tests": NcclTestsBackendConfig,
    "mpi": MpiBackendConfig,
}
