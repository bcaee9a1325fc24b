"""Sharding arithmetic: each rank's slices and the collectives of a step."""

from __future__ import annotations

import pytest

from gpulane.errors import InputError
from gpulane.inference.sharding import (
    check_parallel,
    decode_comm,
    prefill_comm,
    rank_slices,
    stage_layers,
    stage_params,
)
from tests.inference.test_shapes import shipped


def test_llama_8b_tp2_slices() -> None:
    s = rank_slices(shipped("llama3-8b"), 2, 1)
    assert (s.heads, s.kv_heads, s.head_dim) == (16, 4, 128)
    assert (s.q_size, s.kv_size, s.qkv_out, s.o_in) == (2048, 512, 3072, 2048)
    assert s.intermediate == 7168
    assert (s.vocab_padded, s.vocab, s.vocab_start) == (128256, 64128, 64128)
    assert (s.head_start, s.kv_head_start) == (16, 4)


def test_kv_heads_replicated_when_fewer_than_ranks() -> None:
    shape = shipped("llama3-70b")  # 8 KV heads
    s = rank_slices(shape, 16, 5)
    assert s.heads == 4 and s.kv_heads == 1
    assert s.kv_head_start == 2  # query heads 20..23 use KV head 20 // 8


def test_vocab_padding() -> None:
    s = rank_slices(shipped("mixtral-8x7b"), 8)
    assert s.vocab_padded == 32256 and s.vocab == 4032  # 32000 padded to 64 x 8


def test_rank_params_add_up_to_the_model() -> None:
    shape = shipped("llama3-8b")
    whole = stage_params(shape, 1, 1, 0)
    tp2 = stage_params(shape, 2, 1, 0, 0) + stage_params(shape, 2, 1, 0, 1)
    norms = (2 * shape.num_layers + 1) * shape.hidden_size
    assert tp2 == whole + norms  # nothing replicated but the norms
    pp2 = stage_params(shape, 1, 2, 0) + stage_params(shape, 1, 2, 1)
    assert pp2 == whole


def test_stage_layers() -> None:
    assert stage_layers(80, 3) == [range(0, 27), range(27, 54), range(54, 80)]
    assert stage_layers(4, 4) == [range(i, i + 1) for i in range(4)]


def test_decode_all_reduces_per_step() -> None:
    shape = shipped("llama3-8b")
    calls = decode_comm(shape, tp=2, pp=1, batch=8, dtype_bytes=2)
    ar = calls[0]
    assert ar.op == "all_reduce"
    assert ar.count == 2 * 32 + 1  # after o_proj and down in each layer, and the embedding
    assert ar.size_bytes == 8 * 4096 * 2  # hidden x tokens x bytes
    ag = calls[1]
    assert (ag.op, ag.count, ag.size_bytes) == ("all_gather", 1, 8 * 128256 * 2)
    assert decode_comm(shape, tp=1, pp=1, batch=8, dtype_bytes=2) == []


def test_prefill_and_pipeline_calls() -> None:
    shape = shipped("llama3-70b")
    calls = {
        c.op: c for c in prefill_comm(shape, tp=2, pp=2, batch=4, input_len=512, dtype_bytes=2)
    }
    assert calls["all_reduce"].count == 2 * 40 + 1
    assert calls["all_reduce"].size_bytes == 4 * 512 * 8192 * 2
    assert calls["all_gather"].size_bytes == 4 * 128256 * 2  # last tokens only
    assert (calls["send"].count, calls["send"].size_bytes) == (2, 4 * 512 * 8192 * 2)


def test_parallel_checks() -> None:
    with pytest.raises(InputError, match="not divisible by tp=3"):
        check_parallel(shipped("llama3-8b"), 3, 1)
    with pytest.raises(InputError, match="pp=40"):
        check_parallel(shipped("llama3-8b"), 1, 40)
    with pytest.raises(InputError, match="KV heads"):
        check_parallel(shipped("glm-4.5-air"), 12, 1)  # 96 heads, 8 KV heads
