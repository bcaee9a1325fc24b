from __future__ import annotations

import itertools

import pytest

from gpulane.errors import InputError
from gpulane.transfers.sizes import (
    LATENCY_SIZE,
    check_size,
    copy_sizes,
    parse_gpus,
    parse_size_value,
    reps_for,
)


def test_default_sweep_is_4k_to_1g_doubling() -> None:
    sizes = copy_sizes()
    assert sizes[0] == 4096
    assert sizes[-1] == 1 << 30
    assert len(sizes) == 19
    assert all(b == 2 * a for a, b in itertools.pairwise(sizes))


def test_suffixes_and_step() -> None:
    assert copy_sizes("1M", "4M") == [1 << 20, 2 << 20, 4 << 20]
    assert copy_sizes("4K", "16K", step="4K") == [4096, 8192, 12288, 16384]
    assert copy_sizes("64K", "64K", factor=None) == [65536]


@pytest.mark.parametrize("size", [0, 1, 3, 4097, 1000001])
def test_sizes_must_be_positive_whole_words(size: int) -> None:
    with pytest.raises(InputError, match=r"multiple of 4|at least 4|cannot grow"):
        copy_sizes(size, max(size, 8), factor=2)


def test_non_word_size_message_suggests_neighbours() -> None:
    with pytest.raises(InputError) as err:
        check_size(4097, "sizes")
    assert "4096 or 4100" in str(err.value)


def test_max_below_min() -> None:
    with pytest.raises(InputError, match="below min"):
        copy_sizes("1G", "4K")


def test_latency_size_is_one_int4() -> None:
    assert LATENCY_SIZE == 16
    assert parse_size_value(16, "latency_size") == 16
    with pytest.raises(InputError):
        parse_size_value(2, "latency_size")


def test_reps_move_at_least_min_sample_bytes_within_cap() -> None:
    assert reps_for(4096, 1 << 20, 64) == 64  # capped
    assert reps_for(64 << 10, 1 << 20, 64) == 16
    assert reps_for(1 << 20, 1 << 20) == 1
    assert reps_for(1 << 30, 1 << 20) == 1
    assert reps_for(3 << 20, 4 << 20) == 2  # rounds up
    with pytest.raises(InputError):
        reps_for(0, 1 << 20)


def test_parse_gpus() -> None:
    assert parse_gpus("all", 2) == [0, 1]
    assert parse_gpus(None, 3) == [0, 1, 2]
    assert parse_gpus(1, 2) == [1]
    assert parse_gpus("0,1", 2) == [0, 1]
    assert parse_gpus([1, 0, 1], 2) == [1, 0]
    assert parse_gpus(["GPU1"], 2) == [1]


@pytest.mark.parametrize("spec", [[2], "x", [], True, "0,5"])
def test_parse_gpus_rejects(spec: object) -> None:
    with pytest.raises(InputError, match="gpus"):
        parse_gpus(spec, 2)


def test_parse_gpus_without_gpus() -> None:
    with pytest.raises(InputError, match="no GPU"):
        parse_gpus("all", 0)
