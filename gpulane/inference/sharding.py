"""Tensor- and pipeline-parallel arithmetic, as Megatron and vLLM split a decoder.

Tensor parallelism (TP): QKV and gate/up projections are column-parallel (each rank holds
a slice of the output features: its heads, its part of the MLP width), o_proj and down are
row-parallel (a slice of the input features) and are followed by an all-reduce of the
hidden state. The embedding is vocabulary-parallel (each rank its rows of the table, then
an all-reduce), and so is the LM head (each rank its vocabulary slice, then an all-gather
of the logits). When there are fewer KV heads than ranks, KV heads are replicated (vLLM).

Pipeline parallelism (PP): layers are split into consecutive stages; a stage sends its
hidden state and residual to the next.

Everything here is pure arithmetic on :class:`~gpulane.inference.shapes.ModelShape`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulane.errors import InputError
from gpulane.inference.shapes import ModelShape

VOCAB_PADDING = 64  # vLLM pads the vocabulary to a multiple of this per rank group


def round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


def check_parallel(shape: ModelShape, tp: int, pp: int) -> None:
    """Raise an InputError naming what does not divide, as vLLM would refuse it."""
    if tp < 1 or pp < 1:
        raise InputError(f"tp and pp must be >= 1, got tp={tp} pp={pp}")
    name = shape.name
    if shape.num_heads % tp:
        raise InputError(
            f"{name}: {shape.num_heads} attention heads are not divisible by tp={tp}; "
            f"choose tp among {divisors(shape.num_heads)}"
        )
    kv = shape.num_kv_heads
    if kv % tp and tp % kv:
        raise InputError(
            f"{name}: {kv} KV heads cannot be split or replicated over tp={tp} "
            "(one must divide the other)"
        )
    if shape.intermediate_size % tp:
        raise InputError(
            f"{name}: intermediate_size {shape.intermediate_size} is not divisible by tp={tp}"
        )
    if shape.is_moe and shape.moe_intermediate_size % tp:
        raise InputError(
            f"{name}: moe_intermediate_size {shape.moe_intermediate_size} is not divisible "
            f"by tp={tp}"
        )
    if shape.num_layers < pp:
        raise InputError(f"{name}: {shape.num_layers} layers cannot make pp={pp} stages")


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def stage_layers(num_layers: int, pp: int) -> list[range]:
    """Consecutive layer ranges per stage; the first stages take one more when uneven."""
    base, extra = divmod(num_layers, pp)
    out, start = [], 0
    for s in range(pp):
        n = base + (1 if s < extra else 0)
        out.append(range(start, start + n))
        start += n
    return out


@dataclass(frozen=True)
class RankSlices:
    """What one tensor-parallel rank holds of each layer (element counts and features)."""

    tp: int
    tp_rank: int
    heads: int  # query heads on this rank
    kv_heads: int  # KV heads on this rank (replicated when fewer than ranks)
    head_dim: int
    q_size: int  # heads * head_dim
    kv_size: int  # kv_heads * head_dim
    qkv_out: int  # q_size + 2 * kv_size: columns of the QKV projection
    o_in: int  # input features of o_proj (row-parallel)
    intermediate: int  # MLP width on this rank (gate and up each)
    moe_intermediate: int  # per-expert width on this rank
    shared_intermediate: int  # shared experts' width on this rank
    vocab_padded: int  # the whole padded vocabulary
    vocab: int  # rows of the embedding / LM head on this rank
    vocab_start: int  # first vocabulary id on this rank
    kv_head_start: int  # first KV head (global index) on this rank
    head_start: int  # first query head (global index) on this rank


def rank_slices(shape: ModelShape, tp: int, tp_rank: int = 0) -> RankSlices:
    check_parallel(shape, tp, 1)
    heads = shape.num_heads // tp
    kv_heads = max(1, shape.num_kv_heads // tp)
    group = shape.num_heads // shape.num_kv_heads
    head_start = tp_rank * heads
    vocab_padded = round_up(shape.vocab_size, VOCAB_PADDING * tp)
    vocab = vocab_padded // tp
    return RankSlices(
        tp=tp,
        tp_rank=tp_rank,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=shape.head_dim,
        q_size=heads * shape.head_dim,
        kv_size=kv_heads * shape.head_dim,
        qkv_out=(heads + 2 * kv_heads) * shape.head_dim,
        o_in=heads * shape.head_dim,
        intermediate=shape.intermediate_size // tp,
        moe_intermediate=shape.moe_intermediate_size // tp if shape.is_moe else 0,
        shared_intermediate=shape.shared_experts * shape.moe_intermediate_size // tp
        if shape.is_moe
        else 0,
        vocab_padded=vocab_padded,
        vocab=vocab,
        vocab_start=tp_rank * vocab,
        kv_head_start=head_start // group,
        head_start=head_start,
    )


def layer_params(shape: ModelShape, s: RankSlices, layer: int) -> int:
    """Parameters of one decoder layer on one TP rank."""
    h = shape.hidden_size
    n = 2 * h  # the two RMSNorms
    n += h * s.qkv_out + (s.qkv_out if shape.qkv_bias else 0)
    n += s.o_in * h
    if shape.is_moe_layer(layer):
        n += shape.num_experts * h  # router, replicated
        n += shape.num_experts * 3 * h * s.moe_intermediate
        n += 3 * h * s.shared_intermediate
    else:
        n += 3 * h * s.intermediate
    return n


def stage_params(shape: ModelShape, tp: int, pp: int, stage: int, tp_rank: int = 0) -> int:
    """Parameters held by the rank (stage, tp_rank)."""
    s = rank_slices(shape, tp, tp_rank)
    layers = stage_layers(shape.num_layers, pp)[stage]
    n = sum(layer_params(shape, s, i) for i in layers)
    first, last = stage == 0, stage == pp - 1
    if first:
        n += s.vocab * shape.hidden_size
    if last:
        n += shape.hidden_size  # final norm
        if not (shape.tie_embeddings and first):
            n += s.vocab * shape.hidden_size
    return n


def max_rank_params(shape: ModelShape, tp: int, pp: int) -> int:
    return max(stage_params(shape, tp, pp, st) for st in range(pp))


@dataclass(frozen=True)
class CommCall:
    """Calls of one kind in one step on one rank: ``count`` calls of ``size_bytes`` each.

    ``size_bytes`` follows nccl-tests' size column: the reduced buffer for all_reduce, the
    whole gathered output for all_gather, the message for send.
    """

    op: str
    count: int
    size_bytes: int

    def to_dict(self) -> dict[str, int | str]:
        return {"op": self.op, "count": self.count, "size_bytes": self.size_bytes}


def step_comm(
    shape: ModelShape,
    tp: int,
    pp: int,
    tokens: int,
    logit_rows: int,
    dtype_bytes: int,
    stage: int = 0,
) -> list[CommCall]:
    """The communication of one forward step on one rank of ``stage``.

    ``tokens`` is how many tokens the step carries (batch for decode, batch x input_len
    for a prefill), ``logit_rows`` how many rows get logits (one per sequence).
    """
    layers = len(stage_layers(shape.num_layers, pp)[stage])
    first, last = stage == 0, stage == pp - 1
    hidden_bytes = tokens * shape.hidden_size * dtype_bytes
    calls: list[CommCall] = []
    if tp > 1:
        n = 2 * layers + (1 if first else 0)
        calls.append(CommCall("all_reduce", n, hidden_bytes))
        if last:
            vocab_padded = round_up(shape.vocab_size, VOCAB_PADDING * tp)
            calls.append(CommCall("all_gather", 1, logit_rows * vocab_padded * dtype_bytes))
    if pp > 1 and not last:
        calls.append(CommCall("send", 2, hidden_bytes))  # hidden state and residual
    return calls


def decode_comm(
    shape: ModelShape, tp: int, pp: int, batch: int, dtype_bytes: int
) -> list[CommCall]:
    """The TP collectives and PP sends on rank 0's stage (the first) and the last stage
    for one decode step of ``batch`` sequences, merged; all-reduce counts are per rank."""
    return _merge_stages(shape, tp, pp, batch, batch, dtype_bytes)


def prefill_comm(
    shape: ModelShape, tp: int, pp: int, batch: int, input_len: int, dtype_bytes: int
) -> list[CommCall]:
    return _merge_stages(shape, tp, pp, batch * input_len, batch, dtype_bytes)


def _merge_stages(
    shape: ModelShape, tp: int, pp: int, tokens: int, rows: int, dtype_bytes: int
) -> list[CommCall]:
    """Per-step calls as a rank sees them: all-reduces of the busiest stage (the first),
    the all-gather of the last, and one stage's sends."""
    first = step_comm(shape, tp, pp, tokens, rows, dtype_bytes, 0)
    out = [c for c in first if c.op != "all_gather"]
    if pp > 1:
        last = step_comm(shape, tp, pp, tokens, rows, dtype_bytes, pp - 1)
        out += [c for c in last if c.op == "all_gather"]
    else:
        out += [c for c in first if c.op == "all_gather"]
    order = {"all_reduce": 0, "all_gather": 1, "send": 2}
    return sorted(out, key=lambda c: order.get(c.op, 9))
