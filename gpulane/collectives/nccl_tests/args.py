"""nccl-tests' command-line options for one collective and type, from the sweep
configuration every backend shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpulane.collectives.plan import SweepPlan, as_list
from gpulane.collectives.spec import collective
from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError


def _int_factor(value: Any) -> int:
    try:
        f = float(value)
    except (TypeError, ValueError) as err:
        raise InputError(f"sizes.factor: expected a number, got {value!r}") from err
    if f != int(f) or f < 2:
        raise InputError(
            f"sizes.factor={value}: nccl-tests' -f takes a whole factor of 2 or more; "
            "use sizes.factor=2 (or sizes.step=BYTES for -i)"
        )
    return int(f)


def test_args(
    cfg: SweepConfig,
    plan: SweepPlan,
    op: str,
    dtype: str,
    gpus_per_process: int,
    json_path: Path | None = None,
    per_iter: bool = False,
) -> list[str]:
    """nccl-tests options for one collective and type, from the sweep configuration."""
    spec = collective(op)
    sizes = plan.sizes
    args = ["-b", str(sizes[0]), "-e", str(sizes[-1])]
    step = cfg.sizes.step
    if step is not None:
        inc = sizes[1] - sizes[0] if len(sizes) > 1 else 1
        args += ["-i", str(inc)]
    else:
        factor = cfg.sizes.factor if cfg.sizes.factor is not None else 2
        args += ["-f", str(_int_factor(factor) if len(sizes) > 1 else 2)]
    t = plan.timing
    args += ["-g", str(gpus_per_process), "-n", str(t.iters), "-w", str(t.warmup)]
    args += ["-c", str(t.check_iters), "-d", dtype]
    if spec.reduces:
        args += ["-o", plan.redop]
    if spec.rooted:
        args += ["-r", str(plan.root)]
    if t.graph:
        args += ["-G", str(t.graph_launches)]
    if per_iter and not t.graph:
        args += ["-I", "1"]
    if json_path is not None:
        args += ["-J", str(json_path)]
    args += [str(a) for a in as_list(getattr(cfg.backend, "extra_args", None))]
    return args
