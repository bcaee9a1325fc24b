"""Memory a token run needs per GPU (weights, KV cache, activations), checked before it runs.

The estimate is for the busiest rank: the stage with the most parameters, its slice of
the KV cache, and the activations of the largest step (a prefill chunk).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpulane.errors import InputError
from gpulane.inference.shapes import ModelShape
from gpulane.inference.sharding import (
    max_rank_params,
    rank_slices,
    round_up,
    stage_layers,
)

GiB = float(1 << 30)
# CUDA context, NCCL buffers, cuBLAS workspaces and the allocator's slack, per GPU.
OVERHEAD_BYTES = int(2.5 * GiB)
CACHE_ALIGN = 16  # KV cache length is padded to this (attention kernels' mask alignment)


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    kv_cache: int
    activations: int
    overhead: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations + self.overhead

    def describe(self) -> str:
        return (
            f"{self.total / GiB:.1f} GiB (weights {self.weights / GiB:.1f}, KV cache "
            f"{self.kv_cache / GiB:.1f}, activations {self.activations / GiB:.1f}, "
            f"runtime {self.overhead / GiB:.1f})"
        )


def cache_len(input_len: int, output_len: int) -> int:
    """KV cache positions per sequence: prompt and generated tokens, padded."""
    return round_up(input_len + max(output_len, 4), CACHE_ALIGN)


def kv_cache_bytes(
    shape: ModelShape, tp: int, pp: int, batch: int, input_len: int, output_len: int, dbytes: int
) -> int:
    s = rank_slices(shape, tp)
    layers = max(len(r) for r in stage_layers(shape.num_layers, pp))
    return layers * 2 * s.kv_size * batch * cache_len(input_len, output_len) * dbytes


def activation_bytes(
    shape: ModelShape, tp: int, batch: int, input_len: int, chunk_tokens: int, dbytes: int
) -> int:
    """Peak live activations of one prefill chunk (whole sequences, at most chunk_tokens)."""
    s = rank_slices(shape, tp)
    seqs = max(1, min(batch, chunk_tokens // max(input_len, 1)))
    t = seqs * input_len
    mlp = 2 * (s.moe_intermediate * shape.top_k if shape.is_moe else s.intermediate)
    if shape.is_moe:
        mlp = max(mlp, 2 * s.intermediate) + 2 * shape.hidden_size * shape.top_k
    # residual, hidden, normed, attention output, and the widest of QKV (with the KV
    # heads expanded for attention) or the MLP's gate/up; logits for the last tokens.
    widest = max(s.qkv_out + 2 * s.q_size, mlp + mlp // 2)
    per_token = 4 * shape.hidden_size + widest
    logits = seqs * s.vocab_padded * 4
    return int(t * per_token * dbytes * 1.25) + logits


def estimate(
    shape: ModelShape,
    tp: int,
    pp: int,
    batch: int,
    input_len: int,
    output_len: int,
    dbytes: int,
    chunk_tokens: int = 16384,
    overhead: int = OVERHEAD_BYTES,
) -> MemoryEstimate:
    return MemoryEstimate(
        weights=max_rank_params(shape, tp, pp) * dbytes,
        kv_cache=kv_cache_bytes(shape, tp, pp, batch, input_len, output_len, dbytes),
        activations=activation_bytes(shape, tp, batch, input_len, chunk_tokens, dbytes),
        overhead=overhead,
    )


def largest_batch(
    shape: ModelShape,
    tp: int,
    pp: int,
    input_len: int,
    output_len: int,
    dbytes: int,
    budget: int,
    chunk_tokens: int = 16384,
    overhead: int = OVERHEAD_BYTES,
) -> int:
    """The largest batch whose estimate fits in ``budget`` bytes (0 when none does)."""
    lo, hi = 0, 1
    fits = lambda b: (  # noqa: E731
        estimate(shape, tp, pp, b, input_len, output_len, dbytes, chunk_tokens, overhead).total
        <= budget
    )
    if not fits(1):
        return 0
    while fits(hi) and hi < 1 << 20:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def largest_layers(
    shape: ModelShape,
    tp: int,
    pp: int,
    batch: int,
    input_len: int,
    output_len: int,
    dbytes: int,
    budget: int,
    chunk_tokens: int = 16384,
    overhead: int = OVERHEAD_BYTES,
) -> int:
    """The most layers (at least pp) whose estimate fits (0 when not even pp layers do)."""
    best = 0
    for n in range(pp, shape.num_layers + 1):
        est = estimate(
            shape.with_layers(n),
            tp,
            pp,
            batch,
            input_len,
            output_len,
            dbytes,
            chunk_tokens,
            overhead,
        )
        if est.total > budget:
            break
        best = n
    return best


def check_fits(
    shape: ModelShape,
    full_layers: int,
    tp: int,
    pp: int,
    batch: int,
    input_len: int,
    output_len: int,
    dbytes: int,
    device_bytes: int,
    where: str,
    chunk_tokens: int = 16384,
    overhead: int = OVERHEAD_BYTES,
    others: str = "",
) -> MemoryEstimate:
    """The estimate; an InputError with the largest batch and layer count that fit when
    it is more than ``device_bytes``. ``others``: who holds the rest of the GPU's memory
    (another process, its pid and memory when known), said beside the free figure."""
    est = estimate(shape, tp, pp, batch, input_len, output_len, dbytes, chunk_tokens, overhead)
    if est.total <= device_bytes:
        return est
    b = largest_batch(
        shape, tp, pp, input_len, output_len, dbytes, device_bytes, chunk_tokens, overhead
    )
    n = largest_layers(
        shape, tp, pp, batch, input_len, output_len, dbytes, device_bytes, chunk_tokens, overhead
    )
    hints = []
    if b:
        hints.append(f"batch<={b}")
    if n:
        hints.append(f"layers={n} (of {full_layers}; the results are scaled up)")
    hints.append(f"more GPUs (tp>{tp} or pp>{pp})")
    raise InputError(
        f"{shape.name} tp={tp} pp={pp} batch={batch} input_len={input_len} "
        f"output_len={output_len} needs {est.describe()} per GPU, but {where} has "
        f"{device_bytes / GiB:.1f} GiB"
        + (f" ({others})" if others else "")
        + "; use "
        + " or ".join(hints)
    )


def held_by_others(run_dir: Any, device: Any, free: int, total: int) -> str:
    """Who holds the GPU's memory that is not free: the pre-flight's reading of the other
    processes on it (pid, name, memory) when there is one, else the bytes in use."""
    from gpulane.topology.gpu_state import foreign_on_gpus

    index = getattr(device, "index", None)
    busy = foreign_on_gpus(run_dir) if run_dir is not None else None
    words = (busy or {}).get(f"GPU{index if index is not None else 0}")
    if words:
        return f"another process holds the rest: {words}"
    used = total - free
    if total and used > 0.25 * total:  # far more than a CUDA context: someone else's
        return f"{used / GiB:.1f} GiB of {total / GiB:.0f} GiB is held outside this run (another process)"
    return ""
