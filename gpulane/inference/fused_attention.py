"""Decode attention in one triton kernel (``decode_attention=fused``): the rotary of q and
of this position's k, the write of k and v into the cache, split-K flash decoding over the
live positions and the merge of the pieces.

Why one kernel: a decode step of the 8B at TP=1 spent 12 us a layer in the four kernels
this replaces (rotary 1.0, cache write 1.3, ``decode_attention=triton``'s split 4.6 and
merge 5.2 us at batch 1, 4x H200 round 6), against about 1 us of cache it reads. Each
launch costs its 1-3 us whatever it does, and the merge ran on only 8 programs.

Each (sequence, KV head, piece of the cache) is a program, as in
:mod:`gpulane.inference.triton_attention`: it attends the group's query heads over its
piece with an online softmax. With enough (sequence, KV head) pairs to fill the GPU each
is one piece, and nothing is merged. The program whose piece holds the new position also ropes
this position's k, writes k and v into the cache, and folds them into its softmax from
registers (it never reads back what it wrote). Each program then takes a ticket (an
atomic counter per (sequence, KV head)); the one that draws the last ticket merges the
pieces and resets the counter: no second kernel. Positions past a sequence's length are
never read.

Two uses, one kernel:

- the compiled decode step (:mod:`gpulane.inference.fused`) hands over the QKV product as
  it comes out: q and the new k un-roped, v, and this position's cos and sin rows
  (``rope=True``, ``new_kv=True``);
- the eager model hands over q roped, with the cache already written (``rope=False``,
  ``new_kv=False``).

Checked against the textbook attention in tests/inference/test_triton_attention.py, on
CPUs through triton's interpreter (``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from gpulane.inference.kernels import triton_attention_fits
from gpulane.inference.triton_attention import attend_piece

# Launch shape, chosen on 2x H100 (benchmarks/inference/attention_kernels.py, round 7):
# with (sequence, KV head) pairs enough to fill most SMs, one piece each (no merge, four
# warps: 28.8 against the two kernels' 32.5 us at the 8B's TP=1, batch 16); with fewer,
# pieces to reach TARGET_PROGRAMS, two warps each
BLOCK_N = 64  # cache positions a program reads per iteration
TARGET_PROGRAMS = 264  # about two programs per SM of an H100/H200 (132 SMs)
ONE_PIECE_FROM = 96  # (sequence, KV head) pairs from which each is one program
NUM_WARPS = 2  # with pieces
ONE_PIECE_WARPS = 4
# at most this many pieces: the merging program holds a group row's pieces at once
MAX_SPLITS = 16

# per device: one int32 counter per (sequence, KV head), zero between launches (the
# merging program resets its own); kept across calls so a CUDA graph replays on it
_TICKETS: dict[tuple[str, int | None], torch.Tensor] = {}


def split_count(
    sequences: int,
    kv_heads: int,
    cache_len: int,
    block: int = BLOCK_N,
    target: int = TARGET_PROGRAMS,
) -> int:
    """Pieces per (sequence, KV head): enough programs to fill the GPU, at least one
    block of positions each."""
    if sequences * kv_heads >= ONE_PIECE_FROM:
        return 1
    blocks = triton.cdiv(cache_len, block)
    return max(1, min(blocks, MAX_SPLITS, triton.cdiv(target, sequences * kv_heads)))


def _tickets(device: torch.device, count: int) -> torch.Tensor:
    key = (device.type, device.index)
    have = _TICKETS.get(key)
    if have is not None and have.numel() >= count:
        return have
    fresh = torch.zeros(max(count, 1024), dtype=torch.int32, device=device)
    capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    if not capturing:  # memory made during a capture belongs to that graph's pool
        _TICKETS[key] = fresh
    return fresh


@triton.jit
def _attend_kernel(
    q_ptr, k_ptr, v_ptr, kn_ptr, vn_ptr, cos_ptr, sin_ptr, len_ptr, part_ptr, ml_ptr,
    ticket_ptr, o_ptr,
    stride_qn, stride_qh, stride_qg,
    stride_kn, stride_kh, stride_ks,
    stride_vn, stride_vh, stride_vs,
    stride_knn, stride_knh, stride_vnn, stride_vnh,
    stride_rope, stride_len, stride_on, stride_oh, stride_og,
    kv_heads, scale,
    GROUP: tl.constexpr, SPLITS: tl.constexpr, SPLIT_SIZE: tl.constexpr,
    G_PAD: tl.constexpr, S_PAD: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr,
    ROPE: tl.constexpr, NEW_KV: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    piece = tl.program_id(1)
    b = bh // kv_heads
    h = bh % kv_heads
    length = tl.load(len_ptr + b * stride_len)
    # with NEW_KV the last live position is this step's: it comes from registers, not
    # the cache
    cached = length - 1 if NEW_KV else length
    start = piece * SPLIT_SIZE
    end = tl.minimum(start + SPLIT_SIZE, cached)
    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, D)
    rows = offs_g < GROUP
    q_at = q_ptr + b * stride_qn + h * stride_qh + offs_g[:, None] * stride_qg
    q = tl.load(q_at + offs_d[None, :], mask=rows[:, None], other=0.0)
    if ROPE:  # GPT-NeoX rotary: x * cos + roll(x, D/2) * sin (the tables carry the sign)
        rolled = (offs_d + D // 2) % D
        cos = tl.load(cos_ptr + b * stride_rope + offs_d).to(tl.float32)
        sin = tl.load(sin_ptr + b * stride_rope + offs_d).to(tl.float32)
        q_roll = tl.load(q_at + rolled[None, :], mask=rows[:, None], other=0.0)
        q = (q.to(tl.float32) * cos[None, :] + q_roll.to(tl.float32) * sin[None, :]).to(
            q_ptr.dtype.element_ty
        )
    k_base = k_ptr + b * stride_kn + h * stride_kh
    v_base = v_ptr + b * stride_vn + h * stride_vh
    m_i, l_i, acc = attend_piece(
        q, k_base, v_base, stride_ks, stride_vs, start, end, scale, offs_d, G_PAD, D, BLOCK,
        SPLIT_SIZE,
    )  # fmt: skip
    if NEW_KV:
        # the piece holding this step's position ropes its k, writes k and v into the
        # cache and attends to them; the other pieces compute the same and mask it off
        pos = length - 1
        own = (pos >= start) & (pos < start + SPLIT_SIZE)
        pos_d = tl.zeros([D], dtype=tl.int32) + pos  # a tensor mask (the interpreter's want)
        own_d = (pos_d >= start) & (pos_d < start + SPLIT_SIZE)
        kn_at = kn_ptr + b * stride_knn + h * stride_knh
        k_new = tl.load(kn_at + offs_d).to(tl.float32)
        if ROPE:
            k_roll = tl.load(kn_at + (offs_d + D // 2) % D).to(tl.float32)
            k_new = k_new * cos + k_roll * sin
        k_new = k_new.to(k_ptr.dtype.element_ty)
        v_new = tl.load(vn_ptr + b * stride_vnn + h * stride_vnh + offs_d)
        tl.store(k_base + pos * stride_ks + offs_d, k_new, mask=own_d)
        tl.store(v_base + pos * stride_vs + offs_d, v_new, mask=own_d)
        s1 = tl.sum(q.to(tl.float32) * k_new.to(tl.float32)[None, :], 1) * scale
        s1 = tl.where(own, s1, float("-inf"))
        m_new = tl.maximum(m_i, s1)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        p1 = tl.exp(s1 - m_safe)
        l_i = l_i * alpha + p1
        acc = acc * alpha[:, None] + p1[:, None] * v_new.to(tl.float32)[None, :]
        m_i = m_new
    if SPLITS == 1:  # one piece: nothing to merge
        dest1 = o_ptr + b * stride_on + h * stride_oh + offs_g[:, None] * stride_og
        out1 = acc / l_i[:, None]
        tl.store(dest1 + offs_d[None, :], out1.to(o_ptr.dtype.element_ty), mask=rows[:, None])
        return
    # this piece's part: [bh, group row, piece] of (m, l) and of the weighted sum
    slot = (bh * GROUP + offs_g) * S_PAD + piece
    tl.store(part_ptr + slot[:, None] * D + offs_d[None, :], acc, mask=rows[:, None])
    tl.store(ml_ptr + slot * 2, m_i, mask=rows)
    tl.store(ml_ptr + slot * 2 + 1, l_i, mask=rows)
    tl.debug_barrier()  # every thread's stores come before the ticket's release
    ticket = tl.atomic_add(ticket_ptr + bh, 1, sem="acq_rel")
    if ticket == SPLITS - 1:  # the last piece of (sequence, KV head) to finish merges
        offs_s = tl.arange(0, S_PAD)
        pieces = offs_s < SPLITS
        for g in tl.static_range(GROUP):  # unrolled: every row's loads in flight at once
            at = (bh * GROUP + g) * S_PAD + offs_s
            # .cg: read from L2, where the other programs' parts are
            m = tl.load(ml_ptr + at * 2, mask=pieces, other=float("-inf"), cache_modifier=".cg")
            weight_l = tl.load(ml_ptr + at * 2 + 1, mask=pieces, other=0.0, cache_modifier=".cg")
            part = tl.load(
                part_ptr + at[:, None] * D + offs_d[None, :],
                mask=pieces[:, None],
                other=0.0,
                cache_modifier=".cg",
            )
            top = tl.max(m, 0)
            weight = tl.where(m == float("-inf"), 0.0, tl.exp(m - top))  # empty: weighs 0
            total = tl.sum(weight * weight_l, 0)
            out = tl.sum(weight[:, None] * part, 0) / total
            dest = o_ptr + b * stride_on + h * stride_oh + g * stride_og + offs_d
            tl.store(dest, out.to(o_ptr.dtype.element_ty))
        tl.atomic_xchg(ticket_ptr + bh, 0)  # ready for the next launch


def fused_decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    k_new: torch.Tensor | None = None,
    v_new: torch.Tensor | None = None,
    cos: torch.Tensor | None = None,
    sin: torch.Tensor | None = None,
    block: int = BLOCK_N,
    num_warps: int | None = None,
    target: int = TARGET_PROGRAMS,
) -> torch.Tensor:
    """q [n, kv_heads, group, d] (last dimension contiguous) over the cache k, v [n,
    kv_heads, cache_len, d], each sequence over its first ``lengths[i]`` positions:
    [n, kv_heads, group, d] in q's dtype.

    With ``k_new`` and ``v_new`` [n, kv_heads, d], the last live position (``lengths - 1``)
    is this step's: it is written into the cache here, not read from it. With ``cos`` and
    ``sin`` ([1 or n, d], :func:`gpulane.inference.model.rope_tables`' layout), q and
    ``k_new`` are roped here first. ``block``, ``num_warps`` and ``target`` (programs to
    aim for) set the launch shape (the module's rule unless a benchmark varies them)."""
    n, kvh, group, d = q.shape
    clen = k.shape[2]
    if not triton_attention_fits(d):
        raise ValueError(f"decode_attention=fused needs a power-of-two head_dim >= 16, got {d}")
    if q.stride(-1) != 1:
        q = q.contiguous()
    new_kv = k_new is not None
    rope = cos is not None
    if new_kv != (v_new is not None) or rope != (sin is not None) or (rope and not new_kv):
        raise ValueError("fused_decode_attention: k_new with v_new, cos with sin (and k_new)")
    kn = k_new if k_new is not None else q[:, :, 0]  # placeholders: never read
    vn = v_new if v_new is not None else q[:, :, 0]
    cs = cos if cos is not None else q[0, 0]
    sn = sin if sin is not None else q[0, 0]
    rope_stride = cs.stride(0) if rope and cs.shape[0] > 1 else 0
    splits = split_count(n, kvh, clen, block, target)
    if num_warps is None:
        num_warps = ONE_PIECE_WARPS if splits == 1 else NUM_WARPS
    split_size = triton.cdiv(triton.cdiv(clen, splits), block) * block
    g_pad = max(16, triton.next_power_of_2(group))
    s_pad = max(16, triton.next_power_of_2(splits))
    part = torch.empty(n * kvh * group * s_pad, d, device=q.device, dtype=torch.float32)
    ml = torch.empty(n * kvh * group * s_pad, 2, device=q.device, dtype=torch.float32)
    out = torch.empty(n, kvh, group, d, device=q.device, dtype=q.dtype)
    tickets = _tickets(q.device, n * kvh)
    _attend_kernel[(n * kvh, splits)](
        q, k, v, kn, vn, cs, sn, lengths, part, ml, tickets, out,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        kn.stride(0), kn.stride(1), vn.stride(0), vn.stride(1),
        rope_stride, lengths.stride(0), out.stride(0), out.stride(1), out.stride(2),
        kvh, d**-0.5,
        GROUP=group, SPLITS=splits, SPLIT_SIZE=split_size, G_PAD=g_pad, S_PAD=s_pad, D=d,
        BLOCK=block, ROPE=rope, NEW_KV=new_kv, num_warps=num_warps,
    )  # fmt: skip
    return out
