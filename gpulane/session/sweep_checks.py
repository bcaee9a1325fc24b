"""What a sweep's front checks before any rank starts, from the backends' declared tables
and this host's memory: a collective the backend cannot run in any placement asked for,
a type or reduction it cannot run, a launcher that cannot start its ranks, points whose
buffers do not fit. Each is one :class:`InputError` naming the key and what to choose."""

from __future__ import annotations

from gpulane.collectives.backends.base import Backend
from gpulane.collectives.pattern import CHUNK
from gpulane.collectives.plan import SweepPlan
from gpulane.collectives.sweep import BACKENDS, backend_class
from gpulane.config.backend import BACKENDS as BACKEND_CONFIGS
from gpulane.config.capabilities import backend_of, launcher_of
from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError
from gpulane.topology.memory import gpu_memory, host_available_bytes
from gpulane.units import format_size

PLACEMENT_WORDS = {True: "in-place", False: "out-of-place"}
IN_PLACE_KEY = {True: "in_place=true", False: "in_place=false"}


def _others_that_run(op: str, placements: list[bool], current: str, device: str) -> list[str]:
    """Backends (other than ``current``) that run ``op`` in every one of ``placements``."""
    out = []
    for name in BACKENDS:
        if name == current or (BACKEND_CONFIGS[name]().needs_gpus and device == "cpu"):
            continue
        cls = backend_class(name)
        if cls is not None and all(cls.placement_problem(op, ip) is None for ip in placements):
            out.append(f"backend={name}")
    return out


def check_placements(cfg: SweepConfig, plan: SweepPlan, device: str) -> None:
    """Refuse a collective the backend runs in none of the placements asked for (torch's
    all_reduce with in_place=false, say). A placement it cannot run beside one it can
    (in_place=both) is measured where it can and footnoted in the table."""
    name = str(cfg.backend.name)
    cls = backend_class(name)
    if cls is None:
        return  # nccl-tests runs both placements itself
    refused: dict[str, str] = {}
    for op in plan.collectives:
        whys = [cls.placement_problem(op, ip) for ip in plan.placements]
        if all(whys):
            refused[op] = str(whys[0])
    if not refused:
        return
    ops = list(refused)
    reasons = "; ".join(dict.fromkeys(refused.values()))
    # A placement the backend has for these collectives, where there is one.
    other = [ip for ip in (True, False) if ip not in plan.placements]
    fixable = bool(other) and all(cls.placement_problem(op, other[0]) is None for op in ops)
    choices = []
    if len(ops) < len(plan.collectives):
        left = [c for c in plan.collectives if c not in refused]
        choices.append(f"drop {', '.join(ops)} from collectives (collectives={','.join(left)})")
    if fixable:
        key = f"in_place={str(cfg.in_place).lower()}"
        what = f"cannot run {', '.join(ops)} {PLACEMENT_WORDS[plan.placements[0]]}"
        choices.append(f"choose {IN_PLACE_KEY[other[0]]} or both")
    else:
        key = "collectives"
        what = f"runs no {', '.join(ops)}"
    alternatives = sorted(
        {b for op in ops for b in _others_that_run(op, plan.placements, name, device)}
    )
    if alternatives:
        choices.append(f"choose {' or '.join(alternatives)}")
    advice = f"; {', or '.join(choices)}" if choices else ""
    raise InputError(f"{key}: backend {name} {what} ({reasons}){advice}")


def host_buffers(cfg: SweepConfig, device: str) -> bool | None:
    """Whether the ranks will hold their buffers in host memory (None: only a rank can
    tell, as for MPI on GPUs, which depends on the library being CUDA-aware)."""
    if device == "cpu":
        return True
    if str(getattr(cfg.backend, "buffers", "auto") or "auto").lower() == "host":
        return True
    if backend_of(cfg).needs_mpi:
        from gpulane.collectives.backends.mpi_library import ompi_built_with_cuda

        return True if ompi_built_with_cuda() is False else None
    return False


def check_inputs(cfg: SweepConfig, plan: SweepPlan, device: str) -> None:
    """Types and reductions the backend says it cannot run, before any rank starts."""
    name = str(cfg.backend.name)
    cls = backend_class(name)
    if cls is None:
        return
    host = host_buffers(cfg, device) if backend_of(cfg).needs_mpi else device == "cpu"
    problems: dict[str, list[str]] = {}
    for op in plan.collectives:
        for dt in plan.dtypes:
            why = cls.input_problem(op, dt, plan.redop, bool(host))
            if why is not None:
                problems.setdefault(why, []).append(f"{op} {dt}")
    if problems:
        said = "; ".join(f"{', '.join(dict.fromkeys(w))}: {why}" for why, w in problems.items())
        raise InputError(f"backend={name} cannot run {said}")


def check_launcher(cfg: SweepConfig, ranks: int) -> None:
    """backend=mpi needs its ranks started by MPI: the local launcher cannot."""
    backend, launcher = backend_of(cfg), launcher_of(cfg)
    if backend.needs_mpi and not launcher.starts_mpi and ranks > 1:
        raise InputError(
            f"backend={backend.name} needs ranks started by MPI, but launcher={launcher.name} "
            f"would start {ranks} "
            "processes that MPI sees each alone; add launcher=mpirun, or start gpulane with "
            "mpirun / srun --mpi=pmix"
        )


def bytes_per_rank(plan: SweepPlan, ranks: int, cls: type[Backend] | None) -> tuple[int, str]:
    """The most memory one rank's buffers take at any point (and that point, in words):
    both buffers out of place, the one shared buffer in place, plus the check's scratch
    (index arrays of up to CHUNK elements)."""
    worst, where = 0, ""
    for _, point in plan.points(ranks):
        size = point.dt.itemsize
        for ip in plan.placements:
            if cls is not None and cls.placement_problem(point.op, ip) is not None:
                continue
            c = point.counts
            if ip:
                elements = max(point.buffer_elements(r) for r in range(ranks))
            else:
                elements = c.send + c.recv
            need = elements * size + 4 * 8 * min(max(c.send, c.recv), CHUNK)
            if need > worst:
                worst = need
                where = f"{point.op} {format_size(point.requested_bytes)} {point.dtype}"
    return worst, where


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else format_size(n)


def check_memory(cfg: SweepConfig, plan: SweepPlan, ranks: int, device: str) -> None:
    """Refuse sizes whose buffers do not fit: on GPUs, each rank's in its GPU's free memory
    (NVML, no CUDA context); on CPUs, all ranks' together in the host's available memory.
    Unknown memory (no NVML, no /proc/meminfo) checks nothing: the ranks find out."""
    if not launcher_of(cfg).on_this_host:
        return  # the ranks run on other hosts
    need, where = bytes_per_rank(plan, ranks, backend_class(str(cfg.backend.name)))
    hint = "lower sizes.max"
    if device == "cuda" and not host_buffers(cfg, device):
        gpus = gpu_memory(list(range(ranks)))
        for gpu in gpus or []:
            if need > gpu.free:
                raise InputError(
                    f"sizes.max={cfg.sizes.max}: {where} needs {_gib(need)} per rank, "
                    f"but GPU {gpu.index} ({gpu.name}) has {_gib(gpu.free)} free of "
                    f"{_gib(gpu.total)}; {hint}"
                )
        return
    available = host_available_bytes()
    if available is not None and need * ranks > available:
        raise InputError(
            f"sizes.max={cfg.sizes.max}: {where} needs {_gib(need)} per rank, "
            f"{_gib(need * ranks)} for {ranks} ranks on this host, but it has "
            f"{_gib(available)} available; {hint}"
        )


def check_front(cfg: SweepConfig, plan: SweepPlan, ranks: int, device: str) -> None:
    """Every check above, in the order a user would fix them."""
    check_placements(cfg, plan, device)
    check_inputs(cfg, plan, device)
    check_launcher(cfg, ranks)
    list(plan.points(ranks))  # a root that is not a rank, before any directory is made
    check_memory(cfg, plan, ranks, device)
