"""A dense decoder layer's decode step in six kernels (``decode_kernels=gemv``), plus the
layer's two TP all-reduces:

1. QKV: residual add + RMSNorm + product (+ bias) (:mod:`gpulane.inference.triton_gemv`);
2. rotary on q and k, with k and v written into the KV cache at this position;
3. attention over the live positions of the cache: split-K flash decoding whose last
   program of each (sequence, KV head) merges the pieces (an atomic count per head), so
   there is no merge kernel; one piece (no merge at all) when programs already fill
   the GPU;
4. o_proj (all-reduce);
5. gate/up: residual add + RMSNorm + product;
6. down: SiLU(gate) x up + product (all-reduce).

Each product is the triton kernel or the cuBLAS path it replaces (the compiled
add+RMSNorm or SiLU x up, then ``F.linear``), whichever was faster when :class:`DecodeKernels`
timed both once for that weight shape and batch (outside any CUDA-graph capture), so
the step never gets slower than the compiled path; the choice and the kernels per layer
are recorded on every token row (``extra.gemv_choice``, ``extra.kernels_per_layer``).
On CPUs (triton's interpreter, the tests) the triton kernels always run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from gpulane.inference.triton_attention import BLOCK_N, split_count
from gpulane.inference.triton_gemv import MAX_ROWS, gemv


@triton.jit
def _rope_cache_kernel(
    qkv_ptr, cos_ptr, sin_ptr, pos_ptr, q_ptr, cache_ptr,
    stride_qkv, stride_q, stride_c0, stride_cn, stride_ch, stride_cs,
    HEADS: tl.constexpr, KV_HEADS: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    h = tl.program_id(1)  # q heads, then KV heads
    offs = tl.arange(0, D)
    row = qkv_ptr + b * stride_qkv
    x = tl.load(row + h * D + offs).to(tl.float32)
    # GPT-NeoX rotary: x * cos + rotate_half(x) * sin, sin signed as rope_tables makes it
    rolled = tl.load(row + h * D + (offs + D // 2) % D).to(tl.float32)
    y = x * tl.load(cos_ptr + offs).to(tl.float32) + rolled * tl.load(sin_ptr + offs).to(tl.float32)
    if h < HEADS:
        tl.store(q_ptr + b * stride_q + h * D + offs, y.to(q_ptr.dtype.element_ty))
    else:
        kh = h - HEADS
        at = cache_ptr + b * stride_cn + kh * stride_ch + tl.load(pos_ptr) * stride_cs + offs
        tl.store(at, y.to(cache_ptr.dtype.element_ty))
        v = tl.load(row + (HEADS + KV_HEADS + kh) * D + offs)
        tl.store(at + stride_c0, v)


@triton.jit
def _attention_kernel(
    q_ptr, k_ptr, v_ptr, pos_ptr, acc_ptr, ml_ptr, count_ptr, o_ptr,
    stride_kn, stride_kh, stride_ks,
    stride_vn, stride_vh, stride_vs,
    kv_heads, group, scale,
    SPLITS: tl.constexpr, SPLIT_SIZE: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    piece = tl.program_id(1)
    b = bh // kv_heads
    h = bh % kv_heads
    length = tl.load(pos_ptr) + 1  # every sequence is at the same position
    start = piece * SPLIT_SIZE
    end = tl.minimum(start + SPLIT_SIZE, length)
    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, D)
    rows = offs_g < group
    # q and the output: [n, kv_heads * group, D], contiguous
    q_at = (b * kv_heads + h) * group * D + offs_g[:, None] * D + offs_d[None, :]
    q = tl.load(q_ptr + q_at, mask=rows[:, None], other=0.0)
    m_i = tl.full([G_PAD], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([G_PAD], dtype=tl.float32)
    acc = tl.zeros([G_PAD, D], dtype=tl.float32)
    k_base = k_ptr + b * stride_kn + h * stride_kh
    v_base = v_ptr + b * stride_vn + h * stride_vh
    for n0 in range(0, SPLIT_SIZE, BLOCK):
        offs_n = start + n0 + tl.arange(0, BLOCK)
        live = offs_n < end
        k = tl.load(
            k_base + offs_n[:, None] * stride_ks + offs_d[None, :], mask=live[:, None], other=0.0
        )
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(live[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(
            v_base + offs_n[:, None] * stride_vs + offs_d[None, :], mask=live[:, None], other=0.0
        )
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    if SPLITS == 1:
        tl.store(o_ptr + q_at, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=rows[:, None])
    else:
        out = (bh * SPLITS + piece) * G_PAD
        tl.store(acc_ptr + (out + offs_g[:, None]) * D + offs_d[None, :], acc)
        tl.store(ml_ptr + (out + offs_g) * 2, m_i)
        tl.store(ml_ptr + (out + offs_g) * 2 + 1, l_i)
        # every thread's stores issued (barrier), then acq_rel at GPU scope: this piece's
        # stores are seen by whichever program counts last, which merges every piece
        # (L2 loads, .cg) and sets the count back to 0 for the next layer and step
        tl.debug_barrier()
        done = tl.atomic_add(count_ptr + bh, 1, sem="acq_rel", scope="gpu")
        if done == SPLITS - 1:
            top = tl.full([G_PAD], float("-inf"), dtype=tl.float32)
            for j in range(SPLITS):
                base = (bh * SPLITS + j) * G_PAD
                top = tl.maximum(top, tl.load(ml_ptr + (base + offs_g) * 2, cache_modifier=".cg"))
            total = tl.zeros([G_PAD], dtype=tl.float32)
            merged = tl.zeros([G_PAD, D], dtype=tl.float32)
            for j in range(SPLITS):
                base = (bh * SPLITS + j) * G_PAD
                m = tl.load(ml_ptr + (base + offs_g) * 2, cache_modifier=".cg")
                weight = tl.exp(m - top)  # an empty piece (m = -inf) weighs 0
                total += weight * tl.load(ml_ptr + (base + offs_g) * 2 + 1, cache_modifier=".cg")
                part = tl.load(
                    acc_ptr + (base + offs_g[:, None]) * D + offs_d[None, :], cache_modifier=".cg"
                )
                merged += weight[:, None] * part
            tl.store(
                o_ptr + q_at, (merged / total[:, None]).to(o_ptr.dtype.element_ty),
                mask=rows[:, None],
            )  # fmt: skip
            tl.atomic_xchg(count_ptr + bh, 0)


def rope_cache(
    qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: torch.Tensor,
    pos: torch.Tensor, heads: int, kv_heads: int,
) -> torch.Tensor:  # fmt: skip
    """q [n, heads * d] roped; this position's roped k and v written into ``cache``
    [2, n, kv_heads, cache_len, d] at ``pos`` [1]: one kernel."""
    n = qkv.shape[0]
    d = cache.shape[-1]
    q = torch.empty(n, heads * d, device=qkv.device, dtype=qkv.dtype)
    _rope_cache_kernel[(n, heads + kv_heads)](
        qkv, cos, sin, pos, q, cache,
        qkv.stride(0), q.stride(0), cache.stride(0), cache.stride(1), cache.stride(2),
        cache.stride(3),
        HEADS=heads, KV_HEADS=kv_heads, D=d,
    )  # fmt: skip
    return q


class DecodeKernels:
    """The kernels of a decode step, with the per-shape choice between triton and cuBLAS.

    ``call`` runs a compiled function of :mod:`gpulane.inference.fused` by name (the
    fallback's add+RMSNorm and SiLU x up)."""

    def __init__(self, call: Callable[..., Any]) -> None:
        self.call = call
        self.choice: dict[str, str] = {}  # "op MxNxK" -> "triton" or "cublas"
        # why the six kernels failed, once (the run then goes on in the compiled path)
        self.error: str | None = None
        self.timings_us: dict[str, dict[str, float]] = {}
        self._counts: dict[tuple[Any, ...], torch.Tensor] = {}

    # -- the products --------------------------------------------------------------------
    def linear(
        self, op: str, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
        prologue: str = "none", residual: torch.Tensor | None = None,
        norm: torch.Tensor | None = None, eps: float = 1e-5,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
        """(out, new residual or None): see :func:`gemv`; triton or cuBLAS as chosen."""

        def fast() -> tuple[torch.Tensor, torch.Tensor | None]:
            return gemv(x, w, bias, prologue, residual, norm, eps)

        def cublas() -> tuple[torch.Tensor, torch.Tensor | None]:
            if prologue == "norm":
                r = torch.zeros_like(x) if residual is None else residual
                h, new_residual = self.call("add_norm", x, r, norm, eps)
                return F.linear(h, w, bias), new_residual
            if prologue == "silu":
                return F.linear(self.call("silu_mul", x), w, bias), None
            return F.linear(x, w, bias), None

        key = self.key(op, x.shape[0], w)
        got = self.choice.get(key)
        if got is None:
            if x.shape[0] > MAX_ROWS:
                got = "cublas"
            elif not x.is_cuda:
                got = "triton"  # the interpreter (tests): the kernel is what is checked
            elif torch.cuda.is_current_stream_capturing():
                got = "cublas"  # no timing inside a capture (the warm runs come first)
            else:
                got = self._faster(key, {"triton": fast, "cublas": cublas})
            self.choice[key] = got
        return fast() if got == "triton" else cublas()

    @staticmethod
    def key(op: str, rows: int, w: torch.Tensor) -> str:
        return f"{op} {rows}x{w.shape[0]}x{w.shape[1]}"

    def _faster(self, key: str, sides: dict[str, Callable[[], Any]]) -> str:
        """The side with the shorter median time, timed as triton times its configurations:
        L2 cleared before every call, so the weight comes from HBM as in a step (a weight
        of a few tens of MB would otherwise be read from L2 on every call but the first)."""
        from triton.testing import do_bench

        times = {
            name: float(do_bench(fn, warmup=5, rep=20, return_mode="median"))
            for name, fn in sides.items()
        }
        self.timings_us[key] = {k: round(v * 1e3, 2) for k, v in times.items()}
        return min(times, key=lambda k: times[k])

    # -- attention -----------------------------------------------------------------------
    def attention(self, q: torch.Tensor, cache: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """q [n, heads * d] over cache [2, n, kv_heads, cache_len, d]'s first pos + 1
        positions: [n, heads * d], one kernel."""
        n = q.shape[0]
        kvh, clen, d = cache.shape[2], cache.shape[3], cache.shape[4]
        group = q.shape[1] // (kvh * d)
        splits = split_count(n, kvh, clen)
        split_size = triton.cdiv(triton.cdiv(clen, splits), BLOCK_N) * BLOCK_N
        g_pad = max(16, triton.next_power_of_2(group))
        acc = torch.empty(n * kvh * splits * g_pad, d, device=q.device, dtype=torch.float32)
        ml = torch.empty(n * kvh * splits * g_pad, 2, device=q.device, dtype=torch.float32)
        out = torch.empty_like(q)
        k, v = cache[0], cache[1]
        _attention_kernel[(n * kvh, splits)](
            q, k, v, pos, acc, ml, self._count(n * kvh, q.device), out,
            k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2),
            kvh, group, d**-0.5,
            SPLITS=splits, SPLIT_SIZE=split_size, G_PAD=g_pad, D=d, BLOCK=BLOCK_N,
        )  # fmt: skip
        return out

    def _count(self, heads: int, device: torch.device) -> torch.Tensor:
        """The pieces finished per head: zero between kernels (the merging program sets
        it back), so one buffer serves every layer and every replay."""
        key = (heads, str(device))
        if key not in self._counts:
            self._counts[key] = torch.zeros(heads, dtype=torch.int32, device=device)
        return self._counts[key]

    # -- what a row records --------------------------------------------------------------
    def kernels_per_layer(self, rows: int | None = None) -> int | None:
        """Kernels of a dense layer at ``rows`` (the largest batch chosen, when None), as
        chosen: 2 (rotary + cache, attention) + 1 per triton product, 2 per cuBLAS product
        with a prologue (the compiled elementwise kernel first) and 1 for o_proj (cuBLAS
        may add a split-K reduce kernel: the profile counts those)."""
        chosen = [
            (k.split()[0], int(k.split()[1].split("x")[0]), v) for k, v in self.choice.items()
        ]
        if rows is None and chosen:
            rows = max(m for _, m, _ in chosen)
        mine = {op: v for op, m, v in chosen if m == rows}
        if len(mine) < 4:
            return None
        return 2 + sum(1 if v == "triton" or op == "o" else 2 for op, v in mine.items())

    def describe(self) -> dict[str, Any]:
        out = {} if self.error is None else {"gemv_error": self.error}
        return out | {
            "gemv_choice": dict(self.choice),
            "gemv_timings_us": dict(self.timings_us),
            "kernels_per_layer": None if self.error else self.kernels_per_layer(),
        }


def decode_layer(
    k: DecodeKernels, layer: Any, x: torch.Tensor, residual: torch.Tensor | None,
    step: Any, cos: torch.Tensor, sin: torch.Tensor, eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """A dense layer's decode step (:class:`gpulane.inference.model.Layer`): (out, residual)."""
    s = layer.s
    n = x.shape[0]
    # the products after the first all-reduce are chosen (compiled, tuned, timed) before
    # it, on zeros: a failure there then leaves every rank's collectives in step
    for op, w, prologue, norm in (
        ("gate_up", layer.w_gate_up, "norm", layer.norm2),
        ("down", layer.w_down, "silu", None),
    ):
        if k.key(op, n, w) not in k.choice:
            width = w.shape[1] * (2 if prologue == "silu" else 1)
            k.linear(op, x.new_zeros(n, width), w, None, prologue, None, norm, eps)
    cache = layer.kv_cache[:, step.rows]
    qkv, residual = k.linear("qkv", x, layer.w_qkv, layer.b_qkv, "norm", residual, layer.norm1, eps)
    q = rope_cache(qkv, cos, sin, cache, step.pos, s.heads, s.kv_heads)
    attn = k.attention(q, cache, step.pos)
    o, _ = k.linear("o", attn, layer.w_o)
    x = layer.comm.all_reduce(o)
    gate_up, residual = k.linear(
        "gate_up", x, layer.w_gate_up, None, "norm", residual, layer.norm2, eps
    )
    down, _ = k.linear("down", gate_up, layer.w_down, None, "silu")
    assert residual is not None
    return layer.comm.all_reduce(down), residual


def try_decode_layer(
    k: DecodeKernels, layer: Any, x: torch.Tensor, residual: torch.Tensor | None,
    step: Any, cos: torch.Tensor, sin: torch.Tensor, eps: float,
) -> tuple[torch.Tensor, torch.Tensor] | None:  # fmt: skip
    """:func:`decode_layer`, or None after a failure outside a CUDA-graph capture (a
    kernel that does not compile on this GPU): the reason is kept in ``k.error`` and on
    the rows, and the step goes on in the compiled path (its cache write is the same)."""
    if k.error is not None:
        return None
    try:
        return decode_layer(k, layer, x, residual, step, cos, sin, eps)
    except Exception as err:
        if x.is_cuda and torch.cuda.is_current_stream_capturing():
            raise
        k.error = f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"
        return None


def fits(layer: Any, rows: int) -> bool:
    """Whether this layer's decode step can take the six kernels: dense, at most
    :data:`MAX_ROWS` rows, a power-of-two head dimension >= 16 (tl.arange, tl.dot)."""
    d = layer.s.head_dim
    return not layer.moe and rows <= MAX_ROWS and d >= 16 and d & (d - 1) == 0
