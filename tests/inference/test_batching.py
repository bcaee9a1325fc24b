"""Lists of whole numbers, micro-batch rows and prefill chunks of a token run."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from gpulane.config.commands import TokensConfig
from gpulane.errors import InputError
from gpulane.inference.batching import (
    as_list,
    configs,
    micro_batch_count,
    prefill_chunks,
    split_rows,
)


def test_as_list_takes_lists_numbers_and_comma_strings() -> None:
    assert as_list("1, 8", "batch") == [1, 8]
    assert as_list([1, 8], "batch") == [1, 8] and as_list(4, "batch") == [4]
    for bad in ("0", "1.5", [True], "x", ""):
        with pytest.raises(InputError, match="batch: expected"):
            as_list(bad, "batch")


def test_rows_and_chunks_of_whole_sequences() -> None:
    assert split_rows(5, 2) == [slice(0, 3), slice(3, 5)]
    assert split_rows(1, 2) == [slice(0, 1)]
    # 16 sequences of 1024 tokens in chunks of at most 8192 tokens: 2 chunks of 8
    assert prefill_chunks(16, 1024, 8192, 1) == [slice(0, 8), slice(8, 16)]
    # a prompt longer than a chunk: one sequence a chunk
    assert len(prefill_chunks(3, 20000, 16384, 1)) == 3
    # at least min_chunks (pipeline micro-batches), at most one per sequence
    assert prefill_chunks(4, 16, 1 << 20, 2) == [slice(0, 2), slice(2, 4)]
    assert prefill_chunks(1, 16, 1 << 20, 2) == [slice(0, 1)]


def test_lists_in_every_form() -> None:
    assert as_list([1, 8], "batch") == [1, 8]
    assert as_list(8, "batch") == [8]
    assert as_list("1, 8,32", "batch") == [1, 8, 32]
    assert as_list(OmegaConf.create([2, 4]), "batch") == [2, 4]


@pytest.mark.parametrize("bad", [0, -1, "1.5", True, "x", ""])
def test_bad_lists_name_the_key(bad: object) -> None:
    with pytest.raises(InputError, match="batch"):
        as_list(bad, "batch")


def test_configs_run_input_then_output_then_batch() -> None:
    cfg = OmegaConf.create({"input_len": [128, 1024], "output_len": 16, "batch": "1,8"})
    assert configs(cfg) == [(128, 16, 1), (128, 16, 8), (1024, 16, 1), (1024, 16, 8)]


def test_split_rows_covers_every_row_once_larger_parts_first() -> None:
    parts = split_rows(10, 4)
    assert [(s.start, s.stop) for s in parts] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert split_rows(2, 4) == [slice(0, 1), slice(1, 2)]  # no empty parts


def test_prefill_chunks_hold_whole_sequences_within_the_token_budget() -> None:
    # 8192 tokens per chunk of 1024-token prompts: 8 sequences per chunk
    assert len(prefill_chunks(32, 1024, 8192, 1)) == 4
    # pipeline stages ask for at least 2 chunks even when one would fit
    assert len(prefill_chunks(4, 128, 8192, 2)) == 2
    # a prompt longer than the budget still goes whole, one per chunk
    assert prefill_chunks(3, 10000, 8192, 1) == [slice(0, 1), slice(1, 2), slice(2, 3)]


def test_micro_batches_default_to_the_stage_count_within_the_batch() -> None:
    assert micro_batch_count(TokensConfig(), 4, 16) == 4
    assert micro_batch_count(TokensConfig(micro_batches=3), 2, 16) == 3
    assert micro_batch_count(TokensConfig(micro_batches="auto"), 4, 2) == 2
