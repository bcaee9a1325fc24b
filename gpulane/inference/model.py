"""A decoder stage with tensor parallelism, a KV cache and random weights, as vLLM runs one.

One :class:`Stage` is what one rank holds: its pipeline stage's layers (all of them when
pp=1) with its tensor-parallel slice of every weight. Weights are random but reproducible:
every rank draws each *whole* weight from a generator seeded by the weight's name and
keeps its slice, so TP=2 and PP=2 hold exactly the weights TP=1 holds (which the tests
check through the logits).

- column-parallel QKV and gate/up, row-parallel o_proj and down, each followed by an
  all-reduce (:class:`Comm`), vocabulary-parallel embedding (all-reduce) and LM head
  (all-gather of the logits);
- attention through ``torch.nn.functional.scaled_dot_product_attention``: causal over the
  prompt in a prefill; in a decode step the query heads of each KV group attend over the
  whole (static) cache under a mask, so a step has static shapes and can be captured in a
  CUDA graph;
- mixture of experts: top-k routing (softmax or sigmoid), experts through grouped matrix
  products over tokens sorted by expert (static shapes again), shared experts beside them.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from gpulane.inference.attention import decode_attention, prefill_attention
from gpulane.inference.fused import Fused
from gpulane.inference.shapes import ModelShape
from gpulane.inference.sharding import RankSlices

RMS_EPS = 1e-5


class Comm:
    """The TP collectives of one stage; no-ops when ``enabled`` is False (compute alone)."""

    def __init__(self, dist: Any, group: Any, tp: int, nccl: bool) -> None:
        self.dist = dist
        self.group = group
        self.tp = tp
        self.nccl = nccl
        self.enabled = True
        self.log: list[tuple[str, int]] | None = None  # (op, size_bytes) while counting

    def _note(self, op: str, nbytes: int) -> None:
        if self.log is not None:
            self.log.append((op, nbytes))

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        if self.tp == 1:
            return x
        self._note("all_reduce", x.numel() * x.element_size())
        if self.enabled:
            self.dist.all_reduce(x, group=self.group)
        return x

    def all_gather_cols(self, x: torch.Tensor) -> torch.Tensor:
        """[rows, n] on each rank -> [rows, tp * n], rank r's columns at r * n."""
        if self.tp == 1:
            return x
        x = x.contiguous()
        rows, n = x.shape
        self._note("all_gather", x.numel() * x.element_size() * self.tp)
        if not self.enabled:
            return x.repeat(1, self.tp)
        if self.nccl:
            out = torch.empty(self.tp * rows, n, dtype=x.dtype, device=x.device)
            self.dist.all_gather_into_tensor(out, x, group=self.group)
            return out.view(self.tp, rows, n).permute(1, 0, 2).reshape(rows, self.tp * n)
        parts = [torch.empty_like(x) for _ in range(self.tp)]
        self.dist.all_gather(parts, x, group=self.group)
        return torch.cat(parts, dim=1)


class Init:
    """Reproducible random weights: each whole weight from a generator seeded by its name."""

    def __init__(self, device: torch.device, dtype: torch.dtype, seed: int) -> None:
        self.device = device
        self.dtype = dtype
        self.seed = seed

    def full(self, name: str, *shape: int, std: float = 1.0) -> torch.Tensor:
        gen = torch.Generator(device=self.device)
        gen.manual_seed((self.seed * 1_000_003 + zlib.crc32(name.encode())) % (1 << 62))
        t = torch.randn(*shape, generator=gen, device=self.device, dtype=self.dtype)
        return t.mul_(std)

    def linear(self, name: str, out_f: int, in_f: int) -> torch.Tensor:
        return self.full(name, out_f, in_f, std=1.0 / math.sqrt(in_f))


def _rows(t: torch.Tensor, start: int, n: int) -> torch.Tensor:
    return t[start : start + n]


def _cols(t: torch.Tensor, start: int, n: int) -> torch.Tensor:
    return t[:, start : start + n]


def grouped_mm_fn() -> Any:
    return getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)


@dataclass
class StepInput:
    """Where a step's tokens sit: ``rows`` of the batch, prompt length or decode state."""

    rows: slice
    seq_len: int  # tokens per sequence in this step (the prompt, or 1 for decode)
    pos: torch.Tensor | None = None  # decode: the position being written, shape [1]
    # decode: [rows, 1, 1, cache_len] additive, 0 = attend, -inf = not (one mask for all
    # layers: a bool mask would be turned into this in every layer)
    mask: torch.Tensor | None = None
    attention: str = "any"  # decode attention kernels (decode_attention)
    # decode: live positions per sequence, [rows] (decode_attention=triton reads only those;
    # None: counted from the mask)
    lengths: torch.Tensor | None = None


class Layer:
    def __init__(
        self,
        shape: ModelShape,
        s: RankSlices,
        index: int,
        init: Init,
        comm: Comm,
        fused: Fused | None = None,
    ) -> None:
        h, d = shape.hidden_size, shape.head_dim
        self.shape, self.s, self.comm, self.index = shape, s, comm, index
        self.fused = fused  # the compiled path (gpulane.inference.fused); None: eager
        p = f"layers.{index}."
        ones = torch.ones(h, device=init.device, dtype=init.dtype)
        self.norm1 = ones.clone()
        self.norm2 = ones.clone()
        q_full = init.linear(p + "q", shape.num_heads * d, h)
        k_full = init.linear(p + "k", shape.num_kv_heads * d, h)
        v_full = init.linear(p + "v", shape.num_kv_heads * d, h)
        self.w_qkv = torch.cat(
            [
                _rows(q_full, s.head_start * d, s.q_size),
                _rows(k_full, s.kv_head_start * d, s.kv_size),
                _rows(v_full, s.kv_head_start * d, s.kv_size),
            ]
        ).contiguous()
        del q_full, k_full, v_full
        self.b_qkv: torch.Tensor | None = None
        if shape.qkv_bias:
            qb = init.full(p + "q.bias", shape.num_heads * d, std=0.02)
            kb = init.full(p + "k.bias", shape.num_kv_heads * d, std=0.02)
            vb = init.full(p + "v.bias", shape.num_kv_heads * d, std=0.02)
            self.b_qkv = torch.cat(
                [
                    _rows(qb, s.head_start * d, s.q_size),
                    _rows(kb, s.kv_head_start * d, s.kv_size),
                    _rows(vb, s.kv_head_start * d, s.kv_size),
                ]
            ).contiguous()
        o_full = init.linear(p + "o", h, shape.num_heads * d)
        self.w_o = _cols(o_full, s.head_start * d, s.o_in).contiguous()
        del o_full
        self.moe = shape.is_moe_layer(index)
        if self.moe:
            self._init_moe(init, p)
        else:
            self.w_gate_up, self.w_down = _mlp(init, p + "mlp.", h, shape.intermediate_size, s)
        # K and V of every position, [2, batch, kv_heads, cache_len, head_dim]: one
        # tensor, so that a decode step writes both with one kernel
        self.kv_cache: torch.Tensor | None = None

    def _init_moe(self, init: Init, p: str) -> None:
        shape, s = self.shape, self.s
        h, im = shape.hidden_size, shape.moe_intermediate_size
        self.w_router = init.linear(p + "router", shape.num_experts, h)
        self.router_bias = torch.zeros(shape.num_experts, device=init.device, dtype=torch.float32)
        gate_up, down = [], []
        for e in range(shape.num_experts):
            gu, dn = _mlp(init, f"{p}experts.{e}.", h, im, s, width=s.moe_intermediate)
            gate_up.append(gu)
            down.append(dn)
        self.w_experts_gate_up = torch.stack(gate_up)  # [E, 2 * im_r, h]
        self.w_experts_down = torch.stack(down)  # [E, h, im_r]
        del gate_up, down
        self.shared: tuple[torch.Tensor, torch.Tensor] | None = None
        if shape.shared_experts:
            self.shared = _mlp(
                init,
                p + "shared.",
                h,
                shape.shared_experts * im,
                s,
                width=s.shared_intermediate,
            )

    def allocate_cache(self, batch: int, cache_len: int) -> None:
        s = self.s
        shape = (2, batch, s.kv_heads, cache_len, s.head_dim)
        self.kv_cache = torch.zeros(shape, device=self.w_qkv.device, dtype=self.w_qkv.dtype)

    def forward(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None,
        step: StepInput,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.fused is not None:
            return self.forward_fused(self.fused, x, residual, step, cos, sin)
        residual = x if residual is None else x + residual
        x = F.rms_norm(residual, (residual.shape[-1],), self.norm1, RMS_EPS)
        x = self.comm.all_reduce(F.linear(self.attention(x, step, cos, sin), self.w_o))
        residual = x + residual
        x = F.rms_norm(residual, (residual.shape[-1],), self.norm2, RMS_EPS)
        x = self.experts(x) if self.moe else _mlp_forward(x, self.w_gate_up, self.w_down)
        return self.comm.all_reduce(x), residual

    def attention(
        self, x: torch.Tensor, step: StepInput, cos: torch.Tensor, sin: torch.Tensor
    ) -> torch.Tensor:
        s = self.s
        assert self.kv_cache is not None
        n_seq = x.shape[0] // step.seq_len
        qkv = F.linear(x, self.w_qkv, self.b_qkv)
        # q and k sit side by side in qkv: one rotary pass over both, written back into
        # qkv so that the roped k lies beside v for the cache write
        qk = qkv[:, : s.q_size + s.kv_size].view(n_seq, step.seq_len, s.heads + s.kv_heads, -1)
        _rope(qk, cos, sin, out=qk)
        q = qkv[:, : s.q_size].view(n_seq, step.seq_len, s.heads, s.head_dim).transpose(1, 2)
        kv = qkv[:, s.q_size :].view(n_seq, step.seq_len, 2, s.kv_heads, s.head_dim)
        kv = kv.permute(2, 0, 3, 1, 4)  # [2, n_seq, kv_heads, seq, head_dim]
        cache = self.kv_cache[:, step.rows]
        group = s.heads // s.kv_heads
        if step.pos is None:  # prefill: the prompt attends to itself, causally
            cache[:, :, :, : step.seq_len] = kv
            return prefill_attention(q, kv[0], kv[1])
        # decode: write this position, then each KV group's query heads over the cache
        cache.index_copy_(3, step.pos, kv)
        q = q.reshape(n_seq, s.kv_heads, group, s.head_dim)
        out = decode_attention(q, cache[0], cache[1], step.mask, step.attention, step.lengths)
        return out.reshape(n_seq, s.q_size)

    def forward_fused(
        self,
        f: Fused,
        x: torch.Tensor,
        residual: torch.Tensor | None,
        step: StepInput,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` through the fused functions (:mod:`gpulane.inference.fused`):
        the same arithmetic in fewer kernels; the collectives stay between them."""
        s = self.s
        assert self.kv_cache is not None
        if residual is None:  # x + 0 is x: one compiled variant for every layer
            residual = torch.zeros_like(x)
        cache = self.kv_cache[:, step.rows]
        norm, heads, kvh = self.norm1, s.heads, s.kv_heads
        if step.pos is None:
            residual, q, kv = f(
                "attn_in_prefill", x, residual, norm, self.w_qkv, self.b_qkv, cos, sin,
                heads, kvh, step.seq_len, RMS_EPS,
            )  # fmt: skip
            cache[:, :, :, : step.seq_len] = kv
            attn = F.linear(prefill_attention(q, kv[0], kv[1]), self.w_o)
        elif step.attention == "bmm":
            attn, residual = f(
                "attn_block_decode", x, residual, norm, self.w_qkv, self.b_qkv, cos, sin,
                cache, step.pos, step.mask, self.w_o, heads, kvh, RMS_EPS,
            )  # fmt: skip
        elif step.attention == "fused":  # rotary, cache write and attention: one kernel
            from gpulane.inference.fused_attention import fused_decode_attention

            assert step.lengths is not None, "decode_attention=fused needs the live lengths"
            residual, qkv = f("qkv_decode", x, residual, norm, self.w_qkv, self.b_qkv, RMS_EPS)
            n, d, q_size = qkv.shape[0], s.head_dim, s.q_size
            q = qkv[:, :q_size].view(n, kvh, heads // kvh, d)
            k_new = qkv[:, q_size : q_size + s.kv_size].view(n, kvh, d)
            v_new = qkv[:, q_size + s.kv_size :].view(n, kvh, d)
            out = fused_decode_attention(
                q, cache[0], cache[1], step.lengths, k_new, v_new, cos, sin
            )
            attn = F.linear(out.reshape(n, q_size), self.w_o)
        else:  # decode attention outside the compiled functions (SDPA kernels)
            residual, q = f(
                "attn_in_decode", x, residual, norm, self.w_qkv, self.b_qkv, cos, sin,
                cache, step.pos, heads, kvh, RMS_EPS,
            )  # fmt: skip
            n = q.shape[0]
            q = q.reshape(n, kvh, heads // kvh, s.head_dim)
            out = decode_attention(q, cache[0], cache[1], step.mask, step.attention, step.lengths)
            attn = F.linear(out.reshape(n, s.q_size), self.w_o)
        x = self.comm.all_reduce(attn)
        tail = "_prefill" if step.pos is None else ""
        if self.moe:
            h, residual = f("add_norm" + tail, x, residual, self.norm2, RMS_EPS)
            y = self.experts(h)
        else:
            y, residual = f(
                "mlp_block" + tail, x, residual, self.norm2, self.w_gate_up, self.w_down, RMS_EPS
            )
        return self.comm.all_reduce(y), residual

    def experts(self, x: torch.Tensor) -> torch.Tensor:
        shape = self.shape
        k, n_exp = shape.top_k, shape.num_experts
        logits = F.linear(x, self.w_router).float()
        if shape.scoring == "sigmoid":
            scores = torch.sigmoid(logits)
            _, idx = torch.topk(scores + self.router_bias, k, dim=-1)
            weights = scores.gather(1, idx)
        else:
            weights, idx = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = order // k
        counts = torch.zeros(n_exp, dtype=torch.int64, device=x.device)
        counts.scatter_add_(0, flat, torch.ones_like(flat))
        offs = torch.cumsum(counts, 0).to(torch.int32)
        xs = x[token]
        mm = grouped_mm_fn()
        width = self.w_experts_down.shape[-1]
        if mm is not None:
            hidden = mm(xs, self.w_experts_gate_up.transpose(-2, -1), offs=offs)
            hidden = F.silu(hidden[:, :width]) * hidden[:, width:]
            ys = mm(hidden, self.w_experts_down.transpose(-2, -1), offs=offs)
        else:  # pragma: no cover - torch without grouped matrix products (not capturable)
            ys = torch.empty_like(xs)
            bounds = [0, *offs.tolist()]
            for e in range(n_exp):
                a, b = bounds[e], bounds[e + 1]
                if b > a:
                    ys[a:b] = _mlp_forward(
                        xs[a:b], self.w_experts_gate_up[e], self.w_experts_down[e]
                    )
        ys = ys * weights.reshape(-1)[order].unsqueeze(1).to(ys.dtype)
        out = torch.zeros_like(x).index_add_(0, token, ys)
        if self.shared is not None:
            out = out + _mlp_forward(x, *self.shared)
        return out


def _mlp(
    init: Init, p: str, h: int, inter: int, s: RankSlices, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gate/up (column-parallel, [2 * width, h]) and down (row-parallel, [h, width])."""
    width = s.intermediate if width is None else width
    start = s.tp_rank * width
    gate = _rows(init.linear(p + "gate", inter, h), start, width)
    up = _rows(init.linear(p + "up", inter, h), start, width)
    gate_up = torch.cat([gate, up]).contiguous()
    down = _cols(init.linear(p + "down", h, inter), start, width).contiguous()
    return gate_up, down


def _mlp_forward(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    gate, up = F.linear(x, w_gate_up).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, w_down)


def _rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Rotary embedding (GPT-NeoX layout, as Llama): x [n, seq, heads, d]; cos and sin
    [seq, d] as :func:`rope_tables` makes them. Three kernels: roll, mul, addcmul; ``out``
    may be ``x`` itself (both reads are done into new tensors first)."""
    half = x.shape[-1] // 2
    # x * cos + rotate_half(x) * sin, where rotate_half(x) = (-x2, x1) = roll(x) * (-1, 1)
    rolled = x.roll(half, -1)
    scaled = x * cos[None, :, None, :]
    if out is None:
        return torch.addcmul(scaled, rolled, sin[None, :, None, :])
    return torch.addcmul(scaled, rolled, sin[None, :, None, :], out=out)


def rope_tables(
    theta: float, head_dim: int, positions: int, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos as (cos, cos) and sin as (-sin, sin) over the head dimension, per position."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(positions, dtype=torch.float32), inv)
    cos, sin = freqs.cos(), freqs.sin()
    full_cos = torch.cat([cos, cos], dim=-1)
    signed_sin = torch.cat([-sin, sin], dim=-1)
    return full_cos.to(device=device, dtype=dtype), signed_sin.to(device=device, dtype=dtype)


class Stage:
    """One rank's part of the model: its stage's layers, TP slices, embedding and LM head."""

    def __init__(
        self,
        shape: ModelShape,
        s: RankSlices,
        layers: range,
        first: bool,
        last: bool,
        comm: Comm,
        init: Init,
        max_positions: int,
        fused: Fused | None = None,
    ) -> None:
        self.shape, self.s, self.comm = shape, s, comm
        self.first, self.last = first, last
        h = shape.hidden_size
        self.embed: torch.Tensor | None = None
        self.lm_head: torch.Tensor | None = None
        table: torch.Tensor | None = None
        if first or (last and shape.tie_embeddings):
            table = _vocab_rows(init.full("embed", shape.vocab_size, h), s)
        if first:
            self.embed = table
        self.layers = [Layer(shape, s, i, init, comm, fused) for i in layers]
        self.final_norm = torch.ones(h, device=init.device, dtype=init.dtype)
        if last:
            if shape.tie_embeddings:
                self.lm_head = table
            else:
                full = init.linear("lm_head", shape.vocab_size, h)
                self.lm_head = _vocab_rows(full, s)
        self.cos, self.sin = rope_tables(
            shape.rope_theta, shape.head_dim, max_positions, init.device, init.dtype
        )

    def allocate_cache(self, batch: int, cache_len: int) -> None:
        for layer in self.layers:
            layer.allocate_cache(batch, cache_len)

    def free_cache(self) -> None:
        for layer in self.layers:
            layer.kv_cache = None

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        assert self.embed is not None
        s = self.s
        if s.tp == 1:
            return F.embedding(ids, self.embed)
        outside = (ids < s.vocab_start) | (ids >= s.vocab_start + s.vocab)
        local = (ids - s.vocab_start).masked_fill(outside, 0)
        x = F.embedding(local, self.embed).masked_fill(outside.unsqueeze(-1), 0)
        return self.comm.all_reduce(x)

    def forward(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None,
        step: StepInput,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Token ids [tokens] on the first stage, else hidden [tokens, h]; returns the
        hidden state and residual after this stage's layers."""
        if self.first:
            x = self.embed_tokens(x)
        if step.pos is None:
            cos, sin = self.cos[: step.seq_len], self.sin[: step.seq_len]
        else:
            cos, sin = self.cos.index_select(0, step.pos), self.sin.index_select(0, step.pos)
        for layer in self.layers:
            x, residual = layer.forward(x, residual, step, cos, sin)
        return x, residual

    def logits(self, x: torch.Tensor, residual: torch.Tensor | None, seq_len: int) -> torch.Tensor:
        """Float logits [sequences, vocab] of each sequence's last token (last stage)."""
        assert self.lm_head is not None
        h = self.shape.hidden_size
        if residual is not None:
            x = x + residual
        last = x.view(-1, seq_len, h)[:, -1]
        last = F.rms_norm(last, (h,), self.final_norm, RMS_EPS)
        local = F.linear(last, self.lm_head)
        full = self.comm.all_gather_cols(local)
        return full[:, : self.shape.vocab_size].float()


def _vocab_rows(full: torch.Tensor, s: RankSlices) -> torch.Tensor:
    """This rank's rows of a [vocab, h] table, padded with zero rows to the padded vocab."""
    stop = min(s.vocab_start + s.vocab, full.shape[0])
    out = torch.zeros(s.vocab, full.shape[1], device=full.device, dtype=full.dtype)
    if stop > s.vocab_start:
        out[: stop - s.vocab_start] = full[s.vocab_start : stop]
    return out
