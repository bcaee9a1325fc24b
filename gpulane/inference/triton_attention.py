"""Decode attention as two triton kernels (``decode_attention=triton``): split-K flash
decoding over the live positions of the cache only.

A decode step has one query row per head and ``group`` query heads per KV head; one
program per KV head would leave most of an H200's 132 SMs idle at batch 1 (8 KV heads),
so the cache is cut into ``splits`` pieces along the sequence and each (sequence, KV
head, piece) is a program that attends its query heads over its piece with an online
softmax (running max and sum); a second kernel merges the pieces. Positions at or past
a sequence's length are never read: no mask, and no read of the padded cache.

The number of pieces depends on the cache length and the batch only (not on how many
positions are live), so a step has static launch shapes and sits in a CUDA graph.
Checked against the textbook softmax attention in tests/inference/test_triton_attention.py
(on CPUs through triton's interpreter, ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from gpulane.inference.kernels import triton_attention_fits

BLOCK_N = 64  # cache positions a program reads per iteration
TARGET_PROGRAMS = 264  # about two programs per SM of an H100/H200 (132 SMs)


def split_count(sequences: int, kv_heads: int, cache_len: int) -> int:
    """Pieces per (sequence, KV head): enough programs to fill the GPU, at least one
    block of positions each."""
    blocks = triton.cdiv(cache_len, BLOCK_N)
    return max(1, min(blocks, triton.cdiv(TARGET_PROGRAMS, sequences * kv_heads)))


@triton.jit
def attend_piece(
    q, k_base, v_base, stride_ks, stride_vs, start, end, scale, offs_d,
    G_PAD: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr, SPLIT_SIZE: tl.constexpr,
):  # fmt: skip
    """Online softmax of q [G_PAD, D] over the cache positions [start, end) of one piece:
    (running max, running sum, weighted sum of v). A fixed trip count (the piece's size):
    blocks past ``end`` load nothing (masked) and add nothing. Shared by this module's
    split kernel and :mod:`gpulane.inference.fused_attention` (inlined by triton)."""
    m_i = tl.full([G_PAD], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([G_PAD], dtype=tl.float32)
    acc = tl.zeros([G_PAD, D], dtype=tl.float32)
    for n0 in range(0, SPLIT_SIZE, BLOCK):
        offs_n = start + n0 + tl.arange(0, BLOCK)
        live = offs_n < end
        k = tl.load(
            k_base + offs_n[:, None] * stride_ks + offs_d[None, :], mask=live[:, None], other=0.0
        )
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(live[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # nothing live yet: no NaN
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(
            v_base + offs_n[:, None] * stride_vs + offs_d[None, :], mask=live[:, None], other=0.0
        )
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return m_i, l_i, acc


@triton.jit
def _split_kernel(
    q_ptr, k_ptr, v_ptr, len_ptr, acc_ptr, ml_ptr,
    stride_qn, stride_qh, stride_qg,
    stride_kn, stride_kh, stride_ks,
    stride_vn, stride_vh, stride_vs,
    stride_len,
    kv_heads, group, scale,
    SPLITS: tl.constexpr, SPLIT_SIZE: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    piece = tl.program_id(1)
    b = bh // kv_heads
    h = bh % kv_heads
    length = tl.load(len_ptr + b * stride_len)
    start = piece * SPLIT_SIZE
    end = tl.minimum(start + SPLIT_SIZE, length)
    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, D)
    rows = offs_g < group
    q = tl.load(
        q_ptr + b * stride_qn + h * stride_qh + offs_g[:, None] * stride_qg + offs_d[None, :],
        mask=rows[:, None],
        other=0.0,
    )
    k_base = k_ptr + b * stride_kn + h * stride_kh
    v_base = v_ptr + b * stride_vn + h * stride_vh
    m_i, l_i, acc = attend_piece(
        q, k_base, v_base, stride_ks, stride_vs, start, end, scale, offs_d, G_PAD, D, BLOCK,
        SPLIT_SIZE,
    )  # fmt: skip
    out = (bh * SPLITS + piece) * G_PAD
    tl.store(acc_ptr + (out + offs_g[:, None]) * D + offs_d[None, :], acc)
    tl.store(ml_ptr + (out + offs_g) * 2, m_i)
    tl.store(ml_ptr + (out + offs_g) * 2 + 1, l_i)


@triton.jit
def _merge_kernel(
    acc_ptr, ml_ptr, o_ptr,
    stride_on, stride_oh, stride_og,
    kv_heads, group,
    SPLITS: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    b = bh // kv_heads
    h = bh % kv_heads
    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, D)
    top = tl.full([G_PAD], float("-inf"), dtype=tl.float32)
    for piece in range(SPLITS):
        base = (bh * SPLITS + piece) * G_PAD
        top = tl.maximum(top, tl.load(ml_ptr + (base + offs_g) * 2))
    total = tl.zeros([G_PAD], dtype=tl.float32)
    acc = tl.zeros([G_PAD, D], dtype=tl.float32)
    for piece in range(SPLITS):
        base = (bh * SPLITS + piece) * G_PAD
        m = tl.load(ml_ptr + (base + offs_g) * 2)
        weight = tl.exp(m - top)  # an empty piece (m = -inf) weighs 0
        total += weight * tl.load(ml_ptr + (base + offs_g) * 2 + 1)
        part = tl.load(acc_ptr + (base + offs_g[:, None]) * D + offs_d[None, :])
        acc += weight[:, None] * part
    out = acc / total[:, None]
    rows = offs_g < group
    dest = o_ptr + b * stride_on + h * stride_oh + offs_g[:, None] * stride_og + offs_d[None, :]
    tl.store(dest, out.to(o_ptr.dtype.element_ty), mask=rows[:, None])


def decode_attention_triton(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor
) -> torch.Tensor:
    """q [n, kv_heads, group, d] over k, v [n, kv_heads, cache_len, d] (last dimension
    contiguous), each sequence over its first ``lengths[i]`` positions: [n, kv_heads,
    group, d] in q's dtype."""
    n, kvh, group, d = q.shape
    clen = k.shape[2]
    if not triton_attention_fits(d):
        raise ValueError(f"decode_attention=triton needs a power-of-two head_dim >= 16, got {d}")
    q = q.contiguous() if q.stride(-1) != 1 else q
    splits = split_count(n, kvh, clen)
    split_size = triton.cdiv(triton.cdiv(clen, splits), BLOCK_N) * BLOCK_N
    g_pad = max(16, triton.next_power_of_2(group))
    acc = torch.empty(n * kvh * splits * g_pad, d, device=q.device, dtype=torch.float32)
    ml = torch.empty(n * kvh * splits * g_pad, 2, device=q.device, dtype=torch.float32)
    out = torch.empty(n, kvh, group, d, device=q.device, dtype=q.dtype)
    _split_kernel[(n * kvh, splits)](
        q, k, v, lengths, acc, ml,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        lengths.stride(0),
        kvh, group, d**-0.5,
        SPLITS=splits, SPLIT_SIZE=split_size, G_PAD=g_pad, D=d, BLOCK=BLOCK_N,
    )  # fmt: skip
    _merge_kernel[(n * kvh,)](
        acc, ml, out,
        out.stride(0), out.stride(1), out.stride(2),
        kvh, group,
        SPLITS=splits, G_PAD=g_pad, D=d,
    )  # fmt: skip
    return out
