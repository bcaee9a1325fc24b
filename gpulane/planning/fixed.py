"""The part of a step's compute that the roofline does not see, in units that follow a
layer's shape, so that a time per unit fitted on one model carries over to another.

- **decode** (a few tokens): every kernel of a layer pays a launch and a tail of a few
  microseconds whatever its size (measured on H200: a 4096-wide RMSNorm 5.9 us, each
  GEMV about 3 us above its bytes at full bandwidth; ``benchmarks/inference/README.md``).
  A layer's fixed time is its kernel count times the time per kernel. The count follows
  the layer's kind: a mixture-of-experts layer routes (router product, softmax, top-k,
  sort by expert, counts, gather, two grouped products, weighting, scatter back, shared
  experts) in about twice the kernels of a dense MLP, and a compiled layer
  (``gpulane tokens compile=true``) fuses the elementwise chains into fewer kernels.
  Width does not change the count: the hidden size, heads and experts' sizes move bytes,
  which the roofline already counts.
- **prefill** (thousands of tokens): the matrix products are compute-bound, and the
  elementwise passes between them (norms, residual adds, rotary, the activation, the
  KV-cache write; for experts the routing's gathers and scatters) stream their tensors
  through HBM one after the other. A layer's fixed time is those bytes, which scale with
  the hidden size, the heads on the rank, the MLP width and, for experts, top-k and the
  expert count.

:func:`stage_units` adds a stage's layers up; ``planning.compute`` fits a time per unit.
"""

from __future__ import annotations

from gpulane.inference.shapes import ModelShape
from gpulane.inference.sharding import rank_slices, stage_layers

# Kernels a decoder layer launches in one decode step as gpulane tokens runs it, the
# matrix products and cuBLAS's split-K reductions included, the TP collectives not
# (they are timed from the build's curves). Eager dense: 651 kernels in an 8B step of
# 32 layers and an LM head (profile_decode.py, H200) = 20 a layer.
DECODE_KERNELS: dict[tuple[bool, bool], int] = {
    # (mixture of experts, compiled) -> kernels
    (False, False): 20,
    (False, True): 13,  # add+norm, QKV, rotary+cache, 2 bmm + softmax, o, add+norm,
    # gate/up, SiLU x up, down, 2 split-K reductions
    (True, False): 43,  # the dense MLP's 5 replaced by routing, experts and shared ones
    (True, True): 37,
}
GB = 1e9


# The bytes a kernel streams at HBM speed in the time its launch and tail take (about 3 us
# at 4 TB/s): a decode step's elementwise traffic, in kernels' worth
LATENCY_BYTES = 12e6


def elementwise_bytes(
    shape: ModelShape, layer: int, tp: int, tokens: int, compiled: bool, dbytes: int = 2
) -> float:
    """Bytes the passes between a layer's matrix products write and read back on a rank:
    2 norms and 2 residual sums (hidden-wide, on every rank), rotary over q and k and the
    cache write (this rank's heads), the attention output, gate/up and their product; for
    experts the router logits and each token's hidden state gathered to its top-k experts,
    their outputs weighted and scattered back."""
    moe = shape.is_moe_layer(layer)
    s = rank_slices(shape, tp)
    h = shape.hidden_size
    # one token's MLP width on the rank (experts: its top-k and the shared ones)
    width = shape.top_k * s.moe_intermediate + s.shared_intermediate if moe else s.intermediate
    per_token = 6 * h + s.qkv_out + s.q_size + 3 * width
    if moe:
        per_token += shape.num_experts + 4 * shape.top_k * h
    passes = 2 if compiled else 3  # eager: unfused chains read some tensors again
    return float(tokens * per_token * dbytes * passes)


def layer_units(
    shape: ModelShape, layer: int, op: str, tp: int, tokens: int, compiled: bool, dbytes: int = 2
) -> float:
    """Fixed-work units of one layer on one TP rank: in a decode step, kernels (plus the
    elementwise traffic in kernels' worth, :data:`LATENCY_BYTES` each: a few percent at
    batch 16); in a prefill (``tokens`` tokens), GB of elementwise traffic."""
    traffic = elementwise_bytes(shape, layer, tp, tokens, compiled, dbytes)
    if op == "decode":
        kernels = DECODE_KERNELS[(shape.is_moe_layer(layer), compiled)]
        return kernels + traffic / LATENCY_BYTES
    return traffic / GB


def stage_units(
    shape: ModelShape, tp: int, pp: int, stage: int, op: str, tokens: int, compiled: bool,
    dbytes: int = 2,
) -> float:  # fmt: skip
    """:func:`layer_units` over the layers of ``stage``."""
    return sum(
        layer_units(shape, layer, op, tp, tokens, compiled, dbytes)
        for layer in stage_layers(shape.num_layers, pp)[stage]
    )


def unit_name(op: str) -> str:
    return "kernel" if op == "decode" else "GB of elementwise traffic"


def stage_launches(
    shape: ModelShape, tp: int, pp: int, stage: int, compiled: bool
) -> tuple[int, int]:
    """(kernels, TP collectives) the host issues for one pass of ``stage``'s layers: what
    an eager prefill chunk costs the host whatever its size (the kernel counts of
    :data:`DECODE_KERNELS`; 2 all-reduces a layer when ``tp`` > 1)."""
    layers = stage_layers(shape.num_layers, pp)[stage]
    kernels = sum(DECODE_KERNELS[(shape.is_moe_layer(i), compiled)] for i in layers)
    return kernels, (2 * len(layers) if tp > 1 else 0)
