"""What a token-rate run will be, checked before any rank starts: the model's shape as run
(all layers or the first N), tp and pp against the shapes and the GPUs, and the memory per
GPU against what the GPU has (refusing with the largest batch or layer count that fits).
"""

from __future__ import annotations

import os
from typing import Any

from gpulane.config.commands import TokensConfig
from gpulane.errors import InputError, MissingComponent
from gpulane.inference.batching import configs
from gpulane.inference.kernels import (
    ATTENTION_BACKENDS,
    COMPILE_MODES,
    TRITON_KERNELS,
    triton_attention_fits,
)
from gpulane.inference.memory import OVERHEAD_BYTES, GiB, cache_len, check_fits
from gpulane.inference.shapes import ModelShape, dtype_bytes, shape_from_config
from gpulane.inference.sharding import check_parallel
from gpulane.topology.memory import gpu_total_bytes, host_available_bytes

CPU_OVERHEAD = 1 << 29


LIST_KEYS = frozenset({"batch", "input_len", "output_len"})


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise InputError(f"{what}: expected a whole number, got {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected a whole number, got {value!r}") from None
    if n < 1 or str(value).strip() != str(n):
        raise InputError(f"{what}: expected a whole number >= 1, got {value!r}")
    return n


def compile_choice(value: Any) -> bool | None:
    """compile= as True, False or None (auto: on GPUs, falling back to eager on failure)."""
    text = str(value).strip().lower()
    if text not in ("auto", "true", "false"):
        raise InputError(f"compile: expected auto, true or false, got {value!r}")
    return None if text == "auto" else text == "true"


def resolve(cfg: TokensConfig, gpus: int) -> tuple[ModelShape, int, int, int, str]:
    """(shape as run, full layer count, tp, pp, device) from the configuration and the
    number of GPUs this host has."""
    full = shape_from_config(dict(cfg.model))
    layers = cfg.layers
    shape = full.with_layers(None if layers is None else _int(layers, "layers"))
    if shape.num_layers > full.num_layers:
        raise InputError(f"layers={shape.num_layers} but {full.name} has {full.num_layers}")
    pp = _int(cfg.pp, "pp")
    kernels = str(cfg.decode_attention or "bmm")
    if kernels not in ATTENTION_BACKENDS:
        raise InputError(
            f"decode_attention: expected one of {', '.join(ATTENTION_BACKENDS)}, got {kernels!r}"
        )
    compile_choice(cfg.compile)
    if str(cfg.compile_mode) not in COMPILE_MODES:
        raise InputError(
            f"compile_mode: expected one of {', '.join(COMPILE_MODES)}, got {cfg.compile_mode!r}"
        )
    device = str(cfg.device).lower()
    if device not in ("auto", "cuda", "cpu"):
        raise InputError(f"device: expected auto, cuda or cpu, got {cfg.device!r}")
    gpus = gpus if device != "cpu" else 0
    tp = (max(1, gpus // pp) if gpus else 1) if str(cfg.tp) == "auto" else _int(cfg.tp, "tp")
    world = tp * pp
    if device == "auto":
        device = "cuda" if gpus >= world else "cpu"
    if device == "cuda":
        if gpus == 0:
            raise MissingComponent("device=cuda but no GPU is visible; use device=cpu")
        if world > gpus:
            raise InputError(
                f"tp={tp} x pp={pp} needs {world} GPUs but this host has {gpus}; "
                "lower tp or pp, or use device=cpu"
            )
    check_parallel(shape, tp, pp)
    dtype_bytes(str(cfg.dtype))
    if kernels in TRITON_KERNELS:
        if device != "cuda" and not os.environ.get("TRITON_INTERPRET"):
            raise InputError(
                f"decode_attention={kernels} needs a GPU (or TRITON_INTERPRET=1, triton's slow "
                "interpreter); use decode_attention=bmm on CPUs"
            )
        if not triton_attention_fits(shape.head_dim):
            raise InputError(
                f"decode_attention={kernels} needs a power-of-two head_dim >= 16; {shape.name} "
                f"has {shape.head_dim}: use decode_attention=bmm"
            )
    return shape, full.num_layers, tp, pp, device


def check_memory(
    cfg: TokensConfig, shape: ModelShape, full_layers: int, tp: int, pp: int, device: str
) -> str:
    """Raise when the largest configuration does not fit; a one-line summary otherwise."""
    runs = configs(cfg)
    dbytes = dtype_bytes(str(cfg.dtype))
    chunk = int(cfg.prefill_chunk_tokens)
    worst = max(runs, key=lambda r: (r[2] * cache_len(r[0], r[1]), r[2] * r[0]))
    frac = float(cfg.memory_fraction or 0.92)
    if device == "cuda":
        total = gpu_total_bytes(0)
        where, overhead = "the GPU", OVERHEAD_BYTES
        budget = int(total * frac) if total else None
    else:
        avail = host_available_bytes()
        where, overhead = f"this host's free memory shared by {tp * pp} ranks", CPU_OVERHEAD
        budget = int(avail * frac / (tp * pp)) if avail else None
    if budget is None:
        return "memory per GPU: unknown (no NVML); the ranks check free memory themselves"
    est = check_fits(
        shape,
        full_layers,
        tp,
        pp,
        worst[2],
        worst[0],
        worst[1],
        dbytes,
        budget,
        where,
        chunk,
        overhead,
    )
    return f"memory per rank at batch {worst[2]}: {est.describe()} of {budget / GiB:.1f} GiB"
