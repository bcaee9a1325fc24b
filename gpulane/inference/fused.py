"""A decoder layer's elementwise chains as a few fused kernels: ``torch.compile`` (inductor)
of small pure functions that sit between the matrix products and the TP collectives.

What a serving engine fuses, and what inductor makes of these functions (one triton
kernel each on GPUs, C++ on CPUs; the matrix products stay cuBLAS calls):

- the residual add and RMSNorm (one reduction kernel writing both the sum and the norm);
- rotary on q and k, written with v straight into the KV cache (decode: one kernel that
  also scatters this position into the cache in place) or into the layout prefill
  attention reads;
- decode attention's scale, mask and softmax (one kernel between the two small batched
  products), with the output projection in the same compiled function;
- SiLU(gate) x up (one kernel between gate/up and down).

The collectives stay outside (eager ``dist`` calls), so every function is the same for
TP=1 and TP=2 and composes with gpulane's own CUDA-graph capture: compiled with
``mode="default"`` (or ``max-autotune-no-cudagraphs``), never with inductor's own graphs.
A decode step's functions are compiled once per shape (``dynamic=False``), a prefill's
with dynamic shapes once a second shape comes; all are shared by every layer: weights
are arguments, not attributes, so 32 layers are one compilation.

The same functions run uncompiled when ``compile`` is off for a check
(:class:`Fused` with ``compile=False``); the model's eager path
(:mod:`gpulane.inference.model`) is separate and unchanged, so "before" stays "before".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from gpulane.inference.kernels import COMPILE_MODES

__all__ = ["COMPILE_MODES", "FUSED_OPS", "Fused"]
# What the compiled path fuses, recorded on every token row (extra.fused_ops)
FUSED_OPS = (
    "residual add + RMSNorm",
    "rotary + KV-cache write",
    "attention scale + mask + softmax",
    "SiLU x up",
)
# shapes compiled per function before dynamo gives up (its default is 8): every
# (batch or micro-batch, prompt length, cache length) of a run is one
RECOMPILE_LIMIT = 64


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary (GPT-NeoX layout) of x [n, seq, heads, d] with cos, sin [seq, d] as
    :func:`gpulane.inference.model.rope_tables` makes them; one fused kernel once compiled."""
    half = x.shape[-1] // 2
    rotated = torch.cat([x[..., half:], x[..., :half]], dim=-1)
    return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]


def _qkv(
    x: torch.Tensor,
    residual: torch.Tensor,
    norm_w: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    heads: int,
    kv_heads: int,
    seq_len: int,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(residual, q, k, v) with q, k roped: [n, seq, heads or kv_heads, d]."""
    residual = x + residual
    h = F.rms_norm(residual, (residual.shape[-1],), norm_w, eps)
    qkv = F.linear(h, w_qkv, b_qkv)
    d = cos.shape[-1]
    qkv = qkv.view(qkv.shape[0] // seq_len, seq_len, heads + 2 * kv_heads, d)
    qk = rope(qkv[:, :, : heads + kv_heads], cos, sin)
    return residual, qk[:, :, :heads], qk[:, :, heads:], qkv[:, :, heads + kv_heads :]


def attn_in_prefill(
    x: torch.Tensor,
    residual: torch.Tensor,
    norm_w: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    heads: int,
    kv_heads: int,
    seq_len: int,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(residual, q [n, heads, seq, d], kv [2, n, kv_heads, seq, d]): the layouts that
    prefill attention and the cache take, written by the rotary kernel itself."""
    residual, q, k, v = _qkv(
        x, residual, norm_w, w_qkv, b_qkv, cos, sin, heads, kv_heads, seq_len, eps
    )
    kv = torch.stack([k, v]).transpose(2, 3).contiguous()
    return residual, q.transpose(1, 2).contiguous(), kv


def attn_in_decode(
    x: torch.Tensor,
    residual: torch.Tensor,
    norm_w: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cache: torch.Tensor,
    pos: torch.Tensor,
    heads: int,
    kv_heads: int,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(residual, q [n, heads, d]); this position's k and v written into ``cache``
    [2, n, kv_heads, cache_len, d] at ``pos`` in place (inductor keeps the scatter in
    place: no copy of the cache)."""
    residual, q, k, v = _qkv(x, residual, norm_w, w_qkv, b_qkv, cos, sin, heads, kv_heads, 1, eps)
    cache.index_copy_(3, pos, torch.stack([k, v]).transpose(2, 3))
    return residual, q[:, 0]


def qkv_decode(
    x: torch.Tensor,
    residual: torch.Tensor,
    norm_w: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor | None,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(residual, qkv [n, (heads + 2 kv_heads) d]) un-roped: ``decode_attention=fused``
    ropes q and k and writes the cache inside its one attention kernel."""
    residual = x + residual
    h = F.rms_norm(residual, (residual.shape[-1],), norm_w, eps)
    return residual, F.linear(h, w_qkv, b_qkv)


def masked_attention(q: torch.Tensor, cache: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """q [n, heads, d] over the whole cache [2, n, kv_heads, cache_len, d] under the
    additive mask [n, 1, 1, cache_len]: [n, heads * d]. Two batched products around one
    scale + mask + softmax kernel (what ``decode_attention=bmm`` does eagerly in three
    kernels and a mask copy)."""
    n, heads, d = q.shape
    kv_heads, clen = cache.shape[2], cache.shape[3]
    g = heads // kv_heads
    k = cache[0].reshape(n * kv_heads, clen, d)
    v = cache[1].reshape(n * kv_heads, clen, d)
    scores = torch.bmm(q.reshape(n * kv_heads, g, d), k.transpose(1, 2)).float()
    scores = scores.view(n, kv_heads, g, clen) * (d**-0.5) + mask.view(n, 1, 1, clen)
    probs = torch.softmax(scores, dim=-1).to(q.dtype)
    return torch.bmm(probs.view(n * kv_heads, g, clen), v).reshape(n, heads * d)


def attn_block_decode(
    x: torch.Tensor,
    residual: torch.Tensor,
    norm_w: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cache: torch.Tensor,
    pos: torch.Tensor,
    mask: torch.Tensor,
    w_o: torch.Tensor,
    heads: int,
    kv_heads: int,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention half of a decode step up to the o_proj all-reduce: (out, residual)."""
    residual, q = attn_in_decode(
        x, residual, norm_w, w_qkv, b_qkv, cos, sin, cache, pos, heads, kv_heads, eps
    )
    return F.linear(masked_attention(q, cache, mask), w_o), residual


def mlp_block(
    x: torch.Tensor,
    residual: torch.Tensor,
    norm_w: torch.Tensor,
    w_gate_up: torch.Tensor,
    w_down: torch.Tensor,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The MLP half up to the down all-reduce: (out, residual)."""
    residual = x + residual
    h = F.rms_norm(residual, (residual.shape[-1],), norm_w, eps)
    gate_up = F.linear(h, w_gate_up)
    width = w_down.shape[1]
    return F.linear(F.silu(gate_up[:, :width]) * gate_up[:, width:], w_down), residual


def add_norm(
    x: torch.Tensor, residual: torch.Tensor, norm_w: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(normed, residual): before a mixture-of-experts MLP, which stays eager."""
    residual = x + residual
    return F.rms_norm(residual, (residual.shape[-1],), norm_w, eps), residual


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "attn_in_prefill": attn_in_prefill,
    "attn_in_decode": attn_in_decode,
    "qkv_decode": qkv_decode,
    "attn_block_decode": attn_block_decode,
    "mlp_block": mlp_block,
    "add_norm": add_norm,
    # the same functions for prefills, compiled apart: prompts come in many lengths and
    # chunk sizes, so these are compiled with dynamic shapes after the second one (a
    # prefill's kernels stream large tensors, where static sizes gain nothing), while a
    # decode step's small kernels are compiled for each shape
    "mlp_block_prefill": mlp_block,
    "add_norm_prefill": add_norm,
}
DYNAMIC = frozenset({"attn_in_prefill", "mlp_block_prefill", "add_norm_prefill"})


def _graphs_compiled() -> int:
    """How many graphs dynamo has compiled in this process (a call that moved it compiled)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class Fused:
    """The functions above, compiled (``compile=True``) or as plain Python.

    ``strict=False`` (``compile=auto``): a compilation that fails turns every function
    back into plain eager Python for the rest of the run and keeps the reason in
    ``error``, rather than failing the run. ``compile_s`` adds up the wall time of the
    calls that compiled (each shape once)."""

    def __init__(self, compile: bool, mode: str = "default", strict: bool = True) -> None:
        self.compiled = compile
        self.mode = mode
        self.strict = strict
        self.error: str | None = None
        self.compile_s = 0.0
        self.fns: dict[str, Callable[..., Any]] = dict(FUNCTIONS)
        if compile:
            import torch._dynamo.config as dynamo_config

            for key in ("cache_size_limit", "recompile_limit"):
                if hasattr(dynamo_config, key):
                    setattr(dynamo_config, key, max(getattr(dynamo_config, key), RECOMPILE_LIMIT))
            kwargs: dict[str, Any] = {"fullgraph": True}
            if mode != "default":
                kwargs["mode"] = mode
            self.fns = {
                name: torch.compile(fn, dynamic=None if name in DYNAMIC else False, **kwargs)
                for name, fn in FUNCTIONS.items()
            }

    @property
    def ops(self) -> list[str]:
        return list(FUSED_OPS) if self.compiled else []

    def __call__(self, name: str, *args: Any) -> Any:
        if not self.compiled:
            return self.fns[name](*args)
        before = _graphs_compiled()
        t0 = time.perf_counter()
        try:
            out = self.fns[name](*args)
        except Exception as err:  # a compiler failure: strict runs fail, auto runs go eager
            capturing = torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
            if self.strict or capturing:
                raise
            self.error = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
            self.compiled = False
            self.fns = dict(FUNCTIONS)
            return self.fns[name](*args)
        if _graphs_compiled() != before:
            self.compile_s += time.perf_counter() - t0
        return out

    def describe(self) -> dict[str, Any]:
        """What a token row records of the compiled path."""
        out: dict[str, Any] = {
            "compile": self.compiled,
            "compile_mode": self.mode if self.compiled else None,
            "fused_ops": self.ops,
        }
        if self.error:
            out["compile_error"] = self.error
        return out
