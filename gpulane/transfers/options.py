"""The settings of a copy run, each checked before a GPU is touched (InputError names the
key)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from gpulane.config.commands import CopyConfig
from gpulane.errors import InputError
from gpulane.transfers.sizes import check_size, copy_sizes, parse_size_value

DIRECTIONS = ("h2d", "d2h", "bidir")
MEMORY_KINDS = ("pageable", "pinned", "pinned-wc")


def _as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _choices(value: Any, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [str(v).strip().lower() for v in _as_list(value, what)]
    if items == ["all"]:
        return list(allowed)
    for item in items:
        if item not in allowed:
            raise InputError(f"{what}: {item!r} is not one of {', '.join(allowed)}")
    return [a for a in allowed if a in items]


def _bools(value: Any, what: str) -> list[bool]:
    out: list[bool] = []
    for item in _as_list(value, what):
        text = str(item).strip().lower()
        if text in ("true", "on", "1", "yes", "enabled"):
            flag = True
        elif text in ("false", "off", "0", "no", "disabled"):
            flag = False
        elif text == "both":
            return [False, True]
        else:
            raise InputError(f"{what}: expected true/false (on/off), got {item!r}")
        if flag not in out:
            out.append(flag)
    return sorted(out)


@dataclass
class Options:
    sizes: list[int]
    directions: list[str]
    memory: list[str]
    numa: Any
    all_gpus: bool
    peer: bool
    peer_access: list[bool]
    peer_bidirectional: bool
    latency: bool
    latency_size: int
    samples: int
    warmup: int
    min_sample_bytes: int
    max_reps: int
    check: bool
    engine: str
    plot: bool


def _positive_int(value: Any, what: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{what}: expected a whole number >= {minimum}, got {value!r}")
    return value


def read_options(cfg: CopyConfig) -> Options:
    """Every setting checked before a GPU is touched (InputError names the key)."""
    sizes = copy_sizes(cfg.sizes.min, cfg.sizes.max, cfg.sizes.factor, cfg.sizes.step)
    engine = str(cfg.engine).lower()
    if engine not in ("auto", "cupy", "torch"):
        raise InputError(f"engine: expected auto, cupy or torch, got {engine!r}")
    return Options(
        sizes=sizes,
        directions=_choices(cfg.directions, DIRECTIONS, "directions"),
        memory=_choices(cfg.memory, MEMORY_KINDS, "memory"),
        numa=cfg.numa,
        all_gpus=bool(cfg.all_gpus),
        peer=bool(cfg.peer),
        peer_access=_bools(cfg.peer_access, "peer_access"),
        peer_bidirectional=bool(cfg.peer_bidirectional),
        latency=bool(cfg.latency),
        latency_size=check_size(parse_size_value(cfg.latency_size, "latency_size"), "latency_size"),
        samples=_positive_int(cfg.samples, "samples"),
        warmup=_positive_int(cfg.warmup, "warmup", 0),
        min_sample_bytes=parse_size_value(cfg.min_sample_bytes, "min_sample_bytes"),
        max_reps=_positive_int(cfg.max_reps, "max_reps"),
        check=bool(cfg.check),
        engine=engine,
        plot=bool(cfg.plot),
    )
