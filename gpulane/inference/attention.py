"""Attention of a prefill (causal, over the prompt) and of a decode step (a few query rows
per KV head over the whole cache), with the kernels ``decode_attention`` names
(:mod:`gpulane.inference.kernels`)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from gpulane.inference.kernels import TRITON_KERNELS, attention_kernels


def prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of a prompt: q [n, heads, seq, d] over k, v [n, kv_heads, seq, d]
    (each KV head repeated for its query heads); [n * seq, heads * d]."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    n, heads, seq, d = out.shape
    return out.transpose(1, 2).reshape(n * seq, heads * d)


def decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    kernels: str,
    lengths: torch.Tensor | None = None,
) -> torch.Tensor:
    """q [n, kv_heads, group, d] over the cache k, v [n, kv_heads, cache_len, d] with the
    additive mask [n, 1, 1, cache_len].

    ``bmm``: three kernels (scores with the mask added, softmax, weighted sum); a decode
    step has a few query rows per KV head, where one fused attention kernel runs on only
    kv_heads blocks and takes longer than the three. Otherwise scaled_dot_product_attention
    restricted to the named kernels (:mod:`gpulane.inference.kernels`). ``triton``: two
    kernels that read only each sequence's first ``lengths`` positions (the mask must then
    be a prefix: lengths are counted from it when not given); ``fused``: the same in one
    kernel (:mod:`gpulane.inference.fused_attention`)."""
    if kernels in TRITON_KERNELS:
        if lengths is None:
            assert mask is not None, f"decode_attention={kernels} needs lengths or a mask"
            lengths = (mask.reshape(mask.shape[0], -1) == 0).sum(-1)
        if kernels == "fused":
            from gpulane.inference.fused_attention import fused_decode_attention

            return fused_decode_attention(q, k, v, lengths)
        from gpulane.inference.triton_attention import decode_attention_triton

        return decode_attention_triton(q, k, v, lengths)
    if kernels == "bmm":
        n, kvh, g, d = q.shape
        bias = mask if mask is not None else torch.zeros((), dtype=q.dtype, device=q.device)
        scores = torch.baddbmm(
            bias.expand(n, kvh, g, k.shape[2]).reshape(n * kvh, g, k.shape[2]),
            q.reshape(n * kvh, g, d),
            k.reshape(n * kvh, -1, d).transpose(1, 2),
            alpha=1.0 / math.sqrt(d),
        )
        probs = torch.softmax(scores, dim=-1)
        return torch.bmm(probs, v.reshape(n * kvh, -1, d)).view(n, kvh, g, d)
    with attention_kernels(kernels):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
