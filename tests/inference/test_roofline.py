"""The bytes and FLOPs of a step, against arithmetic written out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpulane.errors import InputError
from gpulane.inference.memory import cache_len
from gpulane.inference.roofline import experts_reached, step_cost
from gpulane.inference.shapes import ModelShape, shape_from_config

CONF = Path(__file__).parents[2] / "gpulane" / "conf" / "model"


def llama3_8b() -> ModelShape:
    return shape_from_config(yaml.safe_load((CONF / "llama3-8b.yaml").read_text()))


def test_llama3_8b_decode_batch_1_context_1024_tp1() -> None:
    h, kv, inter, vocab, layers = 4096, 8 * 128, 14336, 128256, 32
    ctx = cache_len(1024, 64)
    assert ctx == 1088  # 1024 prompt + 64 generated, a multiple of 16
    # weights per layer: 2 RMSNorms, QKV (4096 x (4096 + 2 x 1024)), o_proj (4096 x 4096),
    # gate, up and down (3 x 4096 x 14336)
    per_layer = 2 * h + h * (h + 2 * kv) + h * h + 3 * h * inter
    assert per_layer == 8_192 + 25_165_824 + 16_777_216 + 176_160_768 == 218_112_000
    # the 32 layers, the final norm and the LM head (128256 rows, already a multiple of
    # 64); the 1.05 GB embedding table is not read, one row of it is
    weights = (layers * per_layer + h + vocab * h) * 2
    assert weights == 15_009_849_344
    embedding = 1 * h * 2  # one row of 4096 bf16
    kv_read = 1 * 1088 * layers * 8 * 128 * 2 * 2  # batch x ctx x layers x kv heads x dim x K,V x B
    assert kv_read == 142_606_336
    kv_write = 1 * layers * 8 * 128 * 2 * 2  # the new position
    # per token per layer: 6 hidden-wide tensors (2 norms, o_proj and down outputs, 2
    # residual sums), QKV out (6144), attention out (4096), gate, up and SiLU.mul (3 x
    # 14336): 77824 elements, each written and read; the logits (128256) the same
    act = 1 * layers * (6 * h + 6144 + 4096 + 3 * inter) * 2 * 2 + 1 * vocab * 2 * 2
    assert act == 9_961_472 + 513_024
    # FLOPs: 2 x matmul weights x tokens (norms are not matmuls), LM head, attention:
    # QK^T and AV, 2 x 2 x ctx x 4096 per layer
    matmul = layers * (h * (h + 2 * kv) + h * h + 3 * h * inter)
    flops = 2 * matmul * 1 + 2 * vocab * h * 1 + 4 * layers * 1 * 1088 * 4096
    assert flops == 13_958_643_712 + 1_050_673_152 + 570_425_344

    c = step_cost(llama3_8b(), "decode", 1, ctx, 2)
    assert c.weight_bytes == weights and c.embedding_bytes == embedding
    assert c.kv_read_bytes == kv_read and c.kv_write_bytes == kv_write
    assert c.activation_bytes == act and c.flops == flops
    assert c.bytes == 15_163_069_440
    # memory-bound: 3.79 ms at 4000 GB/s; the FLOPs would take 0.02 ms at 700 TFLOP/s
    assert c.time_s(4000, 700) * 1e3 == pytest.approx(15_163_069_440 / 4e12 * 1e3)
    assert c.compute_s(700) * 1e3 == pytest.approx(0.0223, abs=1e-4)


def test_llama3_8b_decode_batch_16_and_tp2() -> None:
    ctx = 1088
    one = step_cost(llama3_8b(), "decode", 1, ctx, 2)
    c = step_cost(llama3_8b(), "decode", 16, ctx, 2)
    # weights are read once whatever the batch; rows, cache and activations scale with it
    assert c.weight_bytes == one.weight_bytes
    assert c.embedding_bytes == 16 * 8192 and c.kv_read_bytes == 16 * 142_606_336
    assert c.kv_write_bytes == 16 * 131_072
    assert c.activation_bytes == 16 * 9_961_472 + 16 * 128256 * 2 * 2
    assert c.bytes == 17_461_370_880 and c.flops == 16 * one.flops
    # TP=2: half the heads (4 KV heads), half the MLP width, half the vocabulary per rank;
    # the norms are whole on every rank
    t2 = step_cost(llama3_8b(), "decode", 1, ctx, 2, tp=2)
    per_layer = 2 * 4096 + 4096 * (2048 + 2 * 512) + 2048 * 4096 + 3 * 4096 * 7168
    assert t2.weight_bytes == (32 * per_layer + 4096 + 64128 * 4096) * 2
    assert t2.kv_read_bytes == 142_606_336 / 2
    # PP=2: the first stage gathers the rows and has no LM head; the last has no rows
    first = step_cost(llama3_8b(), "decode", 1, ctx, 2, pp=2, stage=0)
    last = step_cost(llama3_8b(), "decode", 1, ctx, 2, pp=2, stage=1)
    assert first.embedding_bytes == 8192 and last.embedding_bytes == 0
    assert first.weight_bytes == 16 * 218_112_000 * 2
    assert last.weight_bytes == (16 * 218_112_000 + 4096 + 128256 * 4096) * 2
    assert first.flops + last.flops == one.flops


def test_llama3_8b_prefill() -> None:
    c = step_cost(llama3_8b(), "prefill", 1, 1024, 2)
    matmul = 32 * 218_103_808  # the layers' matmul weights (no norms)
    # 2 x weights x 1024 tokens, the LM head on the last token only, causal attention:
    # 4 x layers x L^2 / 2 x 4096
    assert c.flops == 2 * matmul * 1024 + 2 * 128256 * 4096 + 4 * 32 * 1024 * 1024 // 2 * 4096
    assert c.embedding_bytes == 1024 * 4096 * 2
    assert c.kv_write_bytes == c.kv_read_bytes == 1024 * 32 * 2 * 1024 * 2
    # the layers compute-bound; the LM head over one row bound by its 1.05 GB of weights,
    # which the longer of the totals would hide (0.26 ms of 21)
    head = (4096 + 128256 * 4096) * 2 + 2 * 128256 * 2
    assert c.head_bytes == head and c.head_flops == 2 * 128256 * 4096
    rest = (c.flops - c.head_flops) / 700e12
    assert c.time_s(4000, 700) == pytest.approx(rest + head / 4000e9, rel=1e-12)
    assert c.time_s(4000, 700) > max(c.compute_s(700), c.memory_s(4000))


def test_experts_at_few_tokens_are_bound_by_the_weights_they_reach() -> None:
    """Qwen3-30B-A3B (128 experts, top-8): the experts a prompt reaches, and so the
    weights an expert layer reads, grow with its tokens as E x (1 - (1 - k/E)^tokens);
    the experts' part is bound by those bytes at a few hundred tokens."""
    shape = ModelShape(name="q3", hidden_size=2048, num_layers=1, num_heads=32, num_kv_heads=4,
                       head_dim=128, intermediate_size=6144, vocab_size=151936,
                       num_experts=128, top_k=8, moe_intermediate_size=768).check()  # fmt: skip
    expert = 3 * 2048 * 768 * 2
    reached = []
    for tokens in (1, 4, 32, 512):
        c = step_cost(shape, "prefill", 1, tokens, 2)
        reached.append(c.expert_bytes / expert)
        assert c.expert_flops == 2 * 8 * 3 * 2048 * 768 * tokens
    assert reached[0] == pytest.approx(8) and reached[1] == pytest.approx(
        128 * (1 - (120 / 128) ** 4)
    )
    assert reached == sorted(reached) and reached[-1] == pytest.approx(128, rel=1e-6)
    c = step_cost(shape, "prefill", 1, 512, 2)
    bound = c.expert_bytes / 4000e9
    assert bound > c.expert_flops / 700e12  # the weights, not the products, set the time
    assert c.time_s(4000, 700) >= bound + c.head_bytes / 4000e9


def moe() -> ModelShape:
    """Layer 0 dense, layer 1 with 4 experts (top-2) of width 32 and one shared expert."""
    return ModelShape(name="moe", hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                      head_dim=16, intermediate_size=256, vocab_size=1000, num_experts=4,
                      top_k=2, moe_intermediate_size=32, shared_experts=1,
                      first_dense_layers=1).check()  # fmt: skip


def test_moe_reads_the_experts_its_tokens_reach() -> None:
    # TP=2 rank: 2 heads (q 32), 1 KV head (16), QKV out 64, MLP 128, expert width 16,
    # shared width 16, vocabulary 1000 padded to 1024: 512 rows
    dense = 2 * 64 + 64 * 64 + 32 * 64 + 3 * 64 * 128  # norms, QKV, o_proj, MLP = 30848
    attn = 2 * 64 + 64 * 64 + 32 * 64  # 6272
    router, expert, shared = 4 * 64, 3 * 64 * 16, 3 * 64 * 16
    head = 64 + 512 * 64  # final norm and LM head
    c = step_cost(moe(), "decode", 1, 32, 2, tp=2)
    # one token reaches its top 2 of the 4 experts: 4 x (1 - (1 - 2/4)^1) = 2
    assert c.weight_bytes == (dense + attn + router + 2 * expert + shared + head) * 2 == 158_848
    # FLOPs: every token multiplies its 2 experts, the shared expert and the router
    matmul = (30848 - 128) + (6272 - 128) + router + 2 * expert + shared
    assert c.flops == 2 * matmul * 1 + 2 * 512 * 64 * 1 + 4 * 2 * 1 * 32 * 32 == 166_400
    assert c.kv_read_bytes == 1 * 32 * 2 * 2 * 16 * 2 == 4096  # seqs x ctx x layers x K,V x 16
    # activations: dense layer 6 x 64 + 64 + 32 + 3 x 128 = 864; MoE layer 6 x 64 + 64 +
    # 32 + 3 x (2 x 16 + 16) + 4 router logits = 628; written and read; logits 512
    assert c.activation_bytes == (864 + 628) * 2 * 2 + 512 * 2 * 2 == 8016
    # two tokens reach 4 x (1 - 1/4) = 3 experts on average; FLOPs stay per token
    c2 = step_cost(moe(), "decode", 2, 32, 2, tp=2)
    assert c2.weight_bytes == (dense + attn + router + 3 * expert + shared + head) * 2
    assert experts_reached(4, 2, 2) == 3.0 and experts_reached(8, 2, 1) == 2.0
    assert experts_reached(8, 2, 4096) == pytest.approx(8.0)
    # a long prefill reaches every expert
    pre = step_cost(moe(), "prefill", 1, 4096, 2, tp=2)
    assert pre.weight_bytes == pytest.approx(
        (dense + attn + router + 4 * expert + shared + head) * 2
    )


def test_unknown_op() -> None:
    with pytest.raises(InputError, match="decode or prefill"):
        step_cost(moe(), "train", 1, 1, 2)
