"""A decode step's small weight products in one triton kernel, split over K
(``decode_products=auto``): x [M <= 16, K] times a weight [N, K], plus a bias.

Why: at TP=4 the 8B's QKV (N=1536) and o_proj (K=1024) are 8-12 MiB. cuBLAS runs QKV on 24
column blocks of 64 (24 of 132 SMs streaming: 9 us where the copy rate needs 4.2) and
o_proj as a split-K product plus a reduction kernel (8.8 us for 2.8); round 8's profiles,
``benchmarks/inference/README.md``. Here the grid is (column blocks, ``SPLIT_K``): each
program reads its K slice and writes fp32 partials, then takes a ticket (an atomic count
per column block); the program that draws the last one sums the pieces, adds the bias,
writes the output and sets the ticket back to 0 (for the next call and the next graph
replay): no reduction kernel. One row multiplies on CUDA cores (an fp32 tile summed once
at the end); 2..16 rows use ``tl.dot`` with the rows padded to 16.

The kernel and its launch shapes come from the ``issue-decode`` branch (round 5, where it
matched cuBLAS on TP=1 and 2 shapes at one row); which of it and cuBLAS a product uses is
chosen per shape by timing both (:mod:`gpulane.inference.products`). Checked against
``F.linear`` on CPUs through triton's interpreter (``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import os
from typing import Any

import torch
import triton
import triton.language as tl

MAX_ROWS = 16  # input rows the kernel takes (tl.dot's smallest M)


@triton.jit(do_not_specialize=["M", "SPLIT_K", "has_bias"])
def _gemv_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, part_ptr, ticket_ptr,
    M, N, K, stride_x, stride_w, stride_o, has_bias, SPLIT_K,
    M_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = tl.arange(0, M_PAD)
    rows = offs_m < M
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = offs_n < N
    # this piece's K slice: whole BLOCK_Ks, so pieces never overlap
    k_per = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    k_lo = pid_k * k_per
    k_hi = tl.minimum(k_lo + k_per, K)
    if M_PAD == 1:
        tile = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    else:
        acc = tl.zeros([M_PAD, BLOCK_N], dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        ks = offs_k < k_hi
        a = tl.load(
            x_ptr + offs_m[:, None] * stride_x + offs_k[None, :],
            mask=rows[:, None] & ks[None, :],
            other=0.0,
        )
        w = tl.load(
            w_ptr + offs_n[:, None] * stride_w + offs_k[None, :],
            mask=cols[:, None] & ks[None, :],
            other=0.0,
        )
        if M_PAD == 1:  # one row: CUDA-core products, reduced once after the loop
            tile += w.to(tl.float32) * a.to(tl.float32)
        else:
            acc += tl.dot(a.to(w.dtype), tl.trans(w))
    if M_PAD == 1:
        acc = tl.sum(tile, 1)[None, :]
    live_out = rows[:, None] & cols[None, :]
    if SPLIT_K > 1:
        # pieces: part [SPLIT_K, M, N] fp32. Every thread's stores issued (barrier), then
        # acq_rel at GPU scope: whichever program counts last sees every piece (L2 loads,
        # .cg), sums them and sets the ticket back to 0
        tl.store(part_ptr + (pid_k * M + offs_m[:, None]) * N + offs_n[None, :], acc, mask=live_out)
        tl.debug_barrier()
        done = tl.atomic_add(ticket_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
        if done == SPLIT_K - 1:
            acc = tl.zeros([M_PAD, BLOCK_N], dtype=tl.float32)
            for j in range(SPLIT_K):
                acc += tl.load(
                    part_ptr + (j * M + offs_m[:, None]) * N + offs_n[None, :],
                    mask=live_out, other=0.0, cache_modifier=".cg",
                )  # fmt: skip
            _finish(acc, b_ptr, out_ptr, offs_m, offs_n, live_out, N, stride_o, has_bias)
            tl.atomic_xchg(ticket_ptr + pid_n, 0)
    else:
        _finish(acc, b_ptr, out_ptr, offs_m, offs_n, live_out, N, stride_o, has_bias)


@triton.jit
def _finish(acc, b_ptr, out_ptr, offs_m, offs_n, live_out, N, stride_o, has_bias):
    """The whole-K sum: the bias, the store."""
    if has_bias:
        acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    tl.store(
        out_ptr + offs_m[:, None] * stride_o + offs_n[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=live_out,
    )


# (BLOCK_N, BLOCK_K, warps, stages) that compile for sm_90 without spilling registers
# (issue-decode, round 5): one row, at most ~64 fp32 of the tile per thread; 16 rows
# (tl.dot), BLOCK_K <= 128
ROW_SHAPES = ((16, 512, 4, 3), (32, 256, 4, 3), (64, 128, 4, 4), (32, 512, 8, 3),
              (64, 256, 8, 3), (16, 256, 4, 4))  # fmt: skip
ROWS_SHAPES = ((16, 128, 4, 3), (32, 128, 4, 3), (64, 64, 4, 3), (32, 128, 8, 3), (64, 128, 8, 3))
SPLITS = (1, 2, 4, 8)


def _configs() -> list[triton.Config]:
    return [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk}, num_warps=w, num_stages=st)
        for bn, bk, w, st in dict.fromkeys(ROW_SHAPES + ROWS_SHAPES)
        for sk in SPLITS
    ]


def prune(n: int, k: int, one_row: bool, sms: int) -> list[tuple[int, int, int, int, int]]:
    """(BLOCK_N, BLOCK_K, warps, stages, SPLIT_K) worth timing for an [N, K] weight: per
    block shape, the split counts that give 2 to 16 programs per SM (fewer leave DRAM
    idle, more only add partials), at most two each, no K slice shorter than a BLOCK_K;
    a weight too small for that gets its largest grid."""
    kept = []
    for bn, bk, w, st in ROW_SHAPES if one_row else ROWS_SHAPES:
        mine = [s for s in SPLITS if s * bk <= max(k, bk)]
        programs = [triton.cdiv(n, bn) * s for s in mine]
        full = [s for s, p in zip(mine, programs, strict=True) if 2 * sms <= p <= 16 * sms]
        for s in full[:2] or mine[-1:]:
            kept.append((bn, bk, w, st, s))
    return kept


def _prune(configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
    one_row = kwargs.get("M_PAD", named_args.get("M_PAD")) == 1
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    want = set(prune(int(named_args["N"]), int(named_args["K"]), one_row, sms))
    return [
        c
        for c in configs
        if (c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_warps, c.num_stages,
            c.kwargs["SPLIT_K"]) in want
    ]  # fmt: skip


INTERPRETED = bool(os.environ.get("TRITON_INTERPRET"))
_tuned: Any = (
    _gemv_kernel
    if INTERPRETED
    else triton.autotune(
        _configs(),
        key=["M", "N", "K", "has_bias"],
        prune_configs_by={"early_config_prune": _prune},
        warmup=5,
        rep=20,
    )(_gemv_kernel)
)

# per device: the tickets, zero between calls (the last program of a column block sets
# its own back), so one buffer serves every product, call and replay
_TICKETS: dict[str, torch.Tensor] = {}


def _tickets(device: torch.device, blocks: int) -> torch.Tensor:
    have = _TICKETS.get(str(device))
    if have is None or have.numel() < blocks:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("gemv: call it once outside a CUDA-graph capture first")
        have = torch.zeros(max(4096, blocks), dtype=torch.int32, device=device)
        _TICKETS[str(device)] = have
    return have


def gemv(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, split_k: int = 2
) -> torch.Tensor:
    """x @ w.T + bias: x [M <= 16, K], w [N, K] with K contiguous. ``split_k`` (and a fixed
    block shape) under the interpreter only: GPUs tune both per shape."""
    m, kx = x.shape
    n, k = w.shape
    if m > MAX_ROWS:
        raise ValueError(f"gemv takes at most {MAX_ROWS} rows, got {m}")
    if w.stride(1) != 1 or kx != k:
        raise ValueError(f"gemv: x [{m}, {kx}] against a weight [{n}, {k}] with K contiguous")
    x = x if x.stride(1) == 1 else x.contiguous()
    m_pad = 1 if m == 1 else MAX_ROWS
    out = torch.empty(m, n, device=x.device, dtype=x.dtype)
    most = max(SPLITS)
    # room for the widest split of any configuration; tickets for the narrowest blocks
    part = torch.empty(most * m * n, device=x.device, dtype=torch.float32)
    tickets = _tickets(x.device, triton.cdiv(n, 16))
    b = bias if bias is not None else out
    args = (x, w, b, out, part, tickets, m, n, k, x.stride(0), w.stride(0), out.stride(0),
            bias is not None)  # fmt: skip
    if INTERPRETED:
        bn, bk = 16, 32
        _gemv_kernel[(triton.cdiv(n, bn), split_k)](
            *args, split_k, M_PAD=m_pad, BLOCK_N=bn, BLOCK_K=bk
        )
    else:
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_N"]), meta["SPLIT_K"])  # noqa: E731
        _tuned[grid](*args, M_PAD=m_pad)
    return out
