"""A decode step's weight products as one triton kernel each (``decode_kernels=gemv``):
a few input rows (a decode batch, at most :data:`MAX_ROWS`) times a bf16 weight [N, K]
read once at near full bandwidth, with what sits before and after the product fused in.

Why: cuBLAS runs a decode step's small products as split-K GEMMs plus a reduce kernel,
and the RMSNorm, SiLU x up and residual add before them are kernels of their own; every
kernel of a CUDA-graph replayed step costs ~2 us of gap and tail on an H200, and a
layer had ~13 of them. Here a program owns ``BLOCK_N`` output columns over the whole K
(no split-K, so no reduce kernel), and the prologue is one of

- ``NORM``: residual add + RMSNorm of the input rows. The norm's 1/rms is a factor per
  row, so it is applied to the accumulator after the loop: each program reads the
  input rows once, as a plain product does, and program 0 writes the new residual;
- ``SILU``: SiLU(gate) x up of a gate/up output [M, 2K];
- ``NONE``: the rows as they are (o_proj);

with an optional bias epilogue (Qwen's QKV). ``M`` is padded to 16 rows for ``tl.dot``.

On GPUs the block sizes are tuned per weight shape (``triton.autotune``); under triton's
interpreter (``TRITON_INTERPRET=1``, the CPU tests) one fixed configuration runs.
Which of this kernel and the cuBLAS path a weight shape uses is chosen by
:class:`gpulane.inference.triton_decode.DecodeKernels` by timing both once.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

MAX_ROWS = 16  # input rows the kernel takes (tl.dot's smallest M)
NONE, NORM, SILU = 0, 1, 2
PROLOGUES = {"none": NONE, "norm": NORM, "silu": SILU}


@triton.jit(do_not_specialize=["M"])  # one compilation for every batch (M == 1 too)
def _gemv_kernel(
    x_ptr, r_ptr, norm_ptr, w_ptr, b_ptr, out_ptr, r_out_ptr,
    M, N, K,
    stride_x, stride_r, stride_w, stride_o, stride_ro,
    eps,
    PROLOGUE: tl.constexpr, HAS_RES: tl.constexpr, HAS_BIAS: tl.constexpr,
    M_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    offs_m = tl.arange(0, M_PAD)
    rows = offs_m < M
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = offs_n < N
    acc = tl.zeros([M_PAD, BLOCK_N], dtype=tl.float32)
    squares = tl.zeros([M_PAD], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        ks = offs_k < K
        live = rows[:, None] & ks[None, :]
        xp = x_ptr + offs_m[:, None] * stride_x + offs_k[None, :]
        if PROLOGUE == 2:  # SILU: x is [M, 2K], gate then up
            gate = tl.load(xp, mask=live, other=0.0).to(tl.float32)
            up = tl.load(xp + K, mask=live, other=0.0).to(tl.float32)
            a = gate * tl.sigmoid(gate) * up
        else:
            a = tl.load(xp, mask=live, other=0.0).to(tl.float32)
            if PROLOGUE == 1:  # NORM
                if HAS_RES:
                    res = tl.load(
                        r_ptr + offs_m[:, None] * stride_r + offs_k[None, :], mask=live, other=0.0
                    )
                    # the sum rounded as the eager model rounds its residual
                    a = (a + res.to(tl.float32)).to(res.dtype).to(tl.float32)
                if pid == 0:
                    tl.store(
                        r_out_ptr + offs_m[:, None] * stride_ro + offs_k[None, :],
                        a.to(r_out_ptr.dtype.element_ty),
                        mask=live,
                    )
                squares += tl.sum(a * a, 1)
                a = a * tl.load(norm_ptr + offs_k, mask=ks, other=0.0).to(tl.float32)[None, :]
        w = tl.load(
            w_ptr + offs_n[:, None] * stride_w + offs_k[None, :],
            mask=cols[:, None] & ks[None, :],
            other=0.0,
        )
        acc += tl.dot(a.to(w.dtype), tl.trans(w))
    if PROLOGUE == 1:
        acc = acc * tl.rsqrt(squares / K + eps)[:, None]
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=cols, other=0.0).to(tl.float32)[None, :]
    tl.store(
        out_ptr + offs_m[:, None] * stride_o + offs_n[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=rows[:, None] & cols[None, :],
    )  # fmt: skip


def _configs() -> list[triton.Config]:
    """A handful of block shapes: small BLOCK_N for narrow weights (enough programs to
    fill 132 SMs without split-K), longer BLOCK_K and more stages to keep loads in flight."""
    out = []
    # four: each is compiled once per prologue on a machine's first run (~1 s each)
    for bn, bk, warps, stages in (
        (16, 256, 4, 3),
        (32, 256, 4, 4),
        (64, 128, 4, 4),
        (32, 512, 8, 3),
    ):
        out.append(
            triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=warps, num_stages=stages)
        )
    return out


INTERPRETED = bool(os.environ.get("TRITON_INTERPRET"))
_tuned = (
    _gemv_kernel
    if INTERPRETED
    else triton.autotune(_configs(), key=["N", "K", "PROLOGUE", "HAS_BIAS"], warmup=5, rep=20)(
        _gemv_kernel
    )
)


def gemv(
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None = None,
    prologue: str = "none",
    residual: torch.Tensor | None = None,
    norm: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(prologue(x) @ w.T + bias, the new residual for ``norm`` else None).

    x [M <= 16, K] (``silu``: [M, 2K]); w [N, K] with K contiguous; ``norm``: x + residual
    (x alone when residual is None) is the new residual, RMS-normed with ``norm`` [K]."""
    kind = PROLOGUES[prologue]
    m = x.shape[0]
    n, k = w.shape
    if m > MAX_ROWS:
        raise ValueError(f"gemv takes at most {MAX_ROWS} rows, got {m}")
    if w.stride(1) != 1:
        raise ValueError("gemv needs the weight's K dimension contiguous")
    want_k = 2 * k if kind == SILU else k
    if x.shape[1] != want_k:
        raise ValueError(f"gemv: input has {x.shape[1]} columns, the weight wants {want_k}")
    x = x if x.stride(1) == 1 else x.contiguous()
    out = torch.empty(m, n, device=x.device, dtype=x.dtype)
    r_out = torch.empty_like(x) if kind == NORM else None
    if kind == NORM and norm is None:
        raise ValueError("gemv: prologue 'norm' needs the norm's weight")
    if residual is not None and residual.stride(1) != 1:
        residual = residual.contiguous()
    args = (
        x, residual if residual is not None else x, norm if norm is not None else x, w,
        bias if bias is not None else x, out, r_out if r_out is not None else out,
        m, n, k,
        x.stride(0), residual.stride(0) if residual is not None else 0, w.stride(0),
        out.stride(0), r_out.stride(0) if r_out is not None else 0,
        eps,
    )  # fmt: skip
    meta = {
        "PROLOGUE": kind,
        "HAS_RES": residual is not None,
        "HAS_BIAS": bias is not None,
        "M_PAD": MAX_ROWS,
    }
    if INTERPRETED:
        _gemv_kernel[(triton.cdiv(n, 32),)](*args, **meta, BLOCK_N=32, BLOCK_K=64)
    else:
        _tuned[lambda c: (triton.cdiv(n, c["BLOCK_N"]),)](*args, **meta)
    return out, r_out
