"""A sweep's configuration, checked once, and the ordered list of points it measures."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpulane.collectives.harness import Timing
from gpulane.collectives.spec import COLLECTIVES, Point, collective, dtype, plan_point, redop
from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError
from gpulane.units import format_size, size_steps

ALL = "all"
DEFAULT_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
)


def as_list(value: Any) -> list[Any]:
    """A config value given as a list, a comma-separated string, or one item."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return list(value)
    return [value]


@dataclass(frozen=True)
class SweepPlan:
    collectives: list[str]
    dtypes: list[str]
    sizes: list[int]
    redop: str
    root: int
    placements: list[bool]  # False = out-of-place, True = in-place, in nccl-tests' order
    timing: Timing
    # sizes.max=auto means 1G with buffers on the GPUs and 32M on the host: the ranks learn
    # where their buffers are (mpi on GPUs may use host buffers) and ask for_device().
    on_device: bool = True
    size_range: tuple[Any, Any, Any, Any] | None = None  # sizes.min, max, factor, step as given

    def for_device(self, on_device: bool) -> SweepPlan:
        """This plan for buffers on the GPUs (True) or the host: only sizes.max=auto
        differs between the two."""
        if on_device == self.on_device or self.size_range is None:
            return self
        low, high, factor, step = self.size_range
        if str(high).lower() != "auto":
            return dataclasses.replace(self, on_device=on_device)
        sizes = size_steps(low, _auto_max(on_device), factor, step)
        return dataclasses.replace(self, sizes=sizes, on_device=on_device)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what the session hands the ranks (``RunDir.save_plan``)."""
        data = dataclasses.asdict(self)
        data["size_range"] = list(self.size_range) if self.size_range is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepPlan:
        fields = dict(data)
        fields["timing"] = Timing(**fields["timing"])
        span = fields.get("size_range")
        fields["size_range"] = tuple(span) if span is not None else None
        return cls(**fields)

    @property
    def lines(self) -> int:
        """Table lines (one per collective, dtype and size)."""
        return len(self.collectives) * len(self.dtypes) * len(self.sizes)

    def points(self, nranks: int) -> Iterator[tuple[int, Point]]:
        i = 0
        for op in self.collectives:
            for dt in self.dtypes:
                for size in self.sizes:
                    yield i, plan_point(op, size, dt, self.redop, self.root, nranks)
                    i += 1


def rounding_notes(plan: SweepPlan, nranks: int) -> list[str]:
    """Sizes a collective cannot split evenly over the ranks, rounded down as nccl-tests
    does (each rank's share a multiple of 16 bytes), said once per collective and type."""
    notes = []
    for op in plan.collectives:
        for dt in plan.dtypes:
            changed = [
                (size, plan_point(op, size, dt, plan.redop, plan.root, nranks).size_bytes)
                for size in plan.sizes
            ]
            changed = [(a, b) for a, b in changed if a != b]
            if changed:
                shown = ", ".join(f"{format_size(a)} -> {format_size(b)}" for a, b in changed[:4])
                more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
                notes.append(
                    f"{op} {dt} on {nranks} ranks: {shown}{more} (rounded down as nccl-tests "
                    "does: whole elements, each rank's share a multiple of 16 bytes)"
                )
    return notes


def placements(value: Any) -> list[bool]:
    text = str(value).strip().lower()
    if text in ("both", "all"):
        return [False, True]
    if text in ("true", "1", "yes", "in", "in_place", "in-place"):
        return [True]
    if text in ("false", "0", "no", "out", "out_of_place", "out-of-place"):
        return [False]
    raise InputError(f"in_place: expected both, true or false, got {value!r}")


def _positive_int(cfg: SweepConfig, key: str, minimum: int = 0) -> int:
    value = getattr(cfg, key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{key}: expected a whole number >= {minimum}, got {value!r}")
    return value


def build_plan(cfg: SweepConfig, on_device: bool) -> SweepPlan:
    """Read and check the sweep part of a config; every error names the key."""
    names = as_list(cfg.collectives)
    if not names:
        raise InputError("collectives: name at least one, e.g. collectives=all_reduce")
    if any(str(n).lower() == ALL for n in names):
        names = list(DEFAULT_COLLECTIVES)
    colls = [collective(n).name for n in names]
    dtypes = [dtype(d).name for d in as_list(cfg.dtype)]
    if not dtypes:
        raise InputError("dtype: name at least one type, e.g. dtype=float")
    op = redop(cfg.redop)
    sizes_cfg = cfg.sizes
    max_bytes = sizes_cfg.max
    if str(max_bytes).lower() == "auto":
        max_bytes = _auto_max(on_device)
    sizes = size_steps(sizes_cfg.min, max_bytes, sizes_cfg.factor, sizes_cfg.step)
    size_range = (sizes_cfg.min, sizes_cfg.max, sizes_cfg.factor, sizes_cfg.step)
    root = cfg.root
    if isinstance(root, bool) or not isinstance(root, int) or root < 0:
        raise InputError(f"root: expected a rank number >= 0, got {root!r}")
    timing = Timing(
        warmup=_positive_int(cfg, "warmup"),
        iters=_positive_int(cfg, "iters", 1),
        check_iters=_positive_int(cfg, "check_iters"),
        graph=bool(cfg.graph),
        graph_launches=_positive_int(cfg, "graph_launches", 1),
    )
    return SweepPlan(
        colls, dtypes, sizes, op, root, placements(cfg.in_place), timing, on_device, size_range
    )


def _auto_max(on_device: bool) -> str:
    return "1G" if on_device else "32M"


def point_label(point: Point, in_place: bool | None = None) -> str:
    where = "" if in_place is None else (" in-place" if in_place else " out-of-place")
    return f"{point.op} {format_size(point.requested_bytes)} {point.dtype}{where}"


def known_collectives() -> list[str]:
    return list(COLLECTIVES)
