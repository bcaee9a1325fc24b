"""The bytes and FLOPs one forward step moves and does on one TP/PP rank: the roofline.

One function, :func:`step_cost`, for decode and prefill, so that ``gpulane advise``, the
inference benchmarks and the token rows count the same bytes. The formula is written out in
``docs/roofline.md``; in short, per rank of stage ``stage``:

- weights read once: the stage's decoder layers (projections, norms, for MoE layers the
  router, the experts the step's tokens reach and the shared experts), and on the last
  stage the final norm and the LM head. The embedding table is not read: a step gathers
  one row per token (``embedding_bytes``);
- KV cache: decode reads every cached position of every sequence (``context``) and writes
  one; prefill writes the prompt's keys and values and its attention reads them back;
- activations: each intermediate of a layer written once and read once, and the logits;
- FLOPs: 2 x the weights a token multiplies x tokens (MoE: top-k experts per token),
  2 x LM head x the rows that get logits, and attention (QK^T and AV).

Pure arithmetic on :class:`~gpulane.inference.shapes.ModelShape`; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulane.errors import InputError
from gpulane.inference.shapes import ModelShape
from gpulane.inference.sharding import RankSlices, rank_slices, stage_layers

OPS = ("decode", "prefill")


@dataclass(frozen=True)
class StepCost:
    """What one step moves through HBM (bytes) and computes (FLOPs) on one rank."""

    op: str
    tokens: int  # tokens the step carries on this rank (all TP ranks carry all of them)
    weight_bytes: float  # weights read once (no embedding table; the LM head included)
    embedding_bytes: float  # embedding rows gathered, one per token (first stage)
    kv_read_bytes: float
    kv_write_bytes: float
    activation_bytes: float  # intermediates written and read back, and the logits
    flops: float
    # the parts of the above that run as kernels of their own with a bound of their own:
    # the routed and shared experts' products, and the LM head with its logits
    expert_bytes: float = 0.0
    expert_flops: float = 0.0
    head_bytes: float = 0.0
    head_flops: float = 0.0

    @property
    def bytes(self) -> float:
        return (
            self.weight_bytes
            + self.embedding_bytes
            + self.kv_read_bytes
            + self.kv_write_bytes
            + self.activation_bytes
        )

    def memory_s(self, hbm_gbps: float) -> float:
        return self.bytes / (hbm_gbps * 1e9)

    def compute_s(self, tflops: float) -> float:
        return self.flops / (tflops * 1e12)

    def time_s(self, hbm_gbps: float, tflops: float) -> float:
        """The roofline, part by part: bytes at the HBM rate or FLOPs at the matrix rate,
        the longer, for the experts, the LM head and the rest each. Why not the longer
        of the totals: the parts are separate kernels one after the other, and at a few
        hundred tokens they sit on different sides of the ridge (a prompt's attention
        and dense products compute-bound; the LM head over one row per sequence, and
        experts that each see a few tokens, bound by their weights), where the totals'
        maximum hides the bound part's time."""
        rate_b, rate_f = hbm_gbps * 1e9, tflops * 1e12
        rest_b = self.bytes - self.expert_bytes - self.head_bytes
        rest_f = self.flops - self.expert_flops - self.head_flops
        return sum(
            max(b / rate_b, f / rate_f)
            for b, f in (
                (rest_b, rest_f),
                (self.expert_bytes, self.expert_flops),
                (self.head_bytes, self.head_flops),
            )
        )

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "op": self.op,
            "tokens": self.tokens,
            "weight_bytes": self.weight_bytes,
            "embedding_bytes": self.embedding_bytes,
            "kv_read_bytes": self.kv_read_bytes,
            "kv_write_bytes": self.kv_write_bytes,
            "activation_bytes": self.activation_bytes,
            "bytes": self.bytes,
            "flops": self.flops,
        }


def experts_reached(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts ``tokens`` tokens reach, each routed to ``top_k`` of
    ``num_experts`` (uniform routing): E x (1 - (1 - k/E)^tokens). top_k at one token,
    all E once there are many."""
    if num_experts <= 0 or tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def _mlp_width(shape: ModelShape, s: RankSlices, moe: bool) -> int:
    """Width of one token's MLP intermediate on a rank (MoE: its top-k experts and the
    shared experts)."""
    if moe:
        return shape.top_k * s.moe_intermediate + s.shared_intermediate
    return s.intermediate


def step_cost(
    shape: ModelShape,
    op: str,
    seqs: int,
    context: int,
    dtype_bytes: int,
    tp: int = 1,
    pp: int = 1,
    stage: int = 0,
) -> StepCost:
    """Bytes and FLOPs of one step on one rank of ``stage`` (TP rank 0's slices).

    ``op`` decode: one new token for each of ``seqs`` sequences, ``context`` cached
    positions read per sequence (the cache length the attention reads). ``op`` prefill:
    ``seqs`` whole prompts of ``context`` tokens each, from an empty cache; logits for
    each sequence's last token."""
    if op not in OPS:
        raise InputError(f"roofline: op must be decode or prefill, got {op!r}")
    s = rank_slices(shape, tp)
    h = shape.hidden_size
    layers = stage_layers(shape.num_layers, pp)[stage]
    first, last = stage == 0, stage == pp - 1
    decode = op == "decode"
    tokens = seqs if decode else seqs * context
    rows = seqs  # rows that get logits: one per sequence

    weights = 0.0  # parameters read
    matmul = 0  # parameters a token multiplies
    act = 0  # intermediate elements per token over the stage's layers
    expert_w = expert_m = 0.0  # of weights and matmul: the experts' products
    for layer in layers:
        moe = shape.is_moe_layer(layer)
        attn = h * s.qkv_out + s.o_in * h
        weights += 2 * h + attn + (s.qkv_out if shape.qkv_bias else 0)
        matmul += attn
        expert = 3 * h * s.moe_intermediate
        if moe:
            reached = experts_reached(shape.num_experts, shape.top_k, tokens)
            shared = 3 * h * s.shared_intermediate
            weights += shape.num_experts * h + reached * expert + shared
            matmul += shape.num_experts * h + shape.top_k * expert + shared
            expert_w += reached * expert + shared
            expert_m += shape.top_k * expert + shared
        else:
            weights += 3 * h * s.intermediate
            matmul += 3 * h * s.intermediate
        width = _mlp_width(shape, s, moe)
        # attention half: normed input, QKV, attention output, o_proj output, residual sum;
        # MLP half: normed input, gate and up, activated product, down output, residual sum
        act += 6 * h + s.qkv_out + s.q_size + 3 * width
        if moe:
            act += shape.num_experts  # router logits
    head = s.vocab * h if last else 0
    if last:
        weights += h + head  # final norm, LM head

    n = len(layers)
    kv_per_token = n * 2 * s.kv_size * dtype_bytes
    if decode:
        kv_read = float(seqs * context * kv_per_token)
        attn_flops = 4.0 * n * seqs * context * s.q_size  # QK^T and AV over the cache
    else:
        kv_read = float(tokens * kv_per_token)  # attention reads the prompt's K and V once
        attn_flops = 4 * n * seqs * context * context / 2 * s.q_size  # causal: half
    logits = 2 * rows * s.vocab * dtype_bytes if last else 0
    return StepCost(
        op=op,
        tokens=tokens,
        weight_bytes=weights * dtype_bytes,
        embedding_bytes=float(tokens * h * dtype_bytes if first else 0),
        kv_read_bytes=kv_read,
        kv_write_bytes=float(tokens * kv_per_token),
        activation_bytes=float(2 * tokens * act * dtype_bytes + logits),
        flops=float(2 * matmul * tokens + 2 * head * rows + attn_flops),
        expert_bytes=expert_w * dtype_bytes,
        expert_flops=2.0 * expert_m * tokens,
        head_bytes=float((h + head) * dtype_bytes + logits) if last else 0.0,
        head_flops=float(2 * head * rows),
    )
