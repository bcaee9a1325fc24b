"""Lists of whole numbers, micro-batch rows and prefill chunks of a token run."""

from __future__ import annotations

import pytest

from gpulane.errors import InputError
from gpulane.inference.batching import as_list, prefill_chunks, split_rows


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
