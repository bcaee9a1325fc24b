from __future__ import annotations

import pytest

from gpulane.collectives.sizes import size_steps
from gpulane.errors import InputError


def test_factor_sweep_like_nccl_tests() -> None:
    assert size_steps(8, "64", 2) == [8, 16, 32, 64]
    assert size_steps("1K", "1M", 4) == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert size_steps("8", "8G", 2)[-1] == 8 << 30
    assert len(size_steps("8", "8G", 2)) == 31


def test_step_sweep() -> None:
    assert size_steps("1K", "4K", None, "1K") == [1024, 2048, 3072, 4096]
    # step wins over factor, as -i overrides -f
    assert size_steps(100, 300, 2, 100) == [100, 200, 300]


def test_single_size() -> None:
    assert size_steps("1M", "1M", 2) == [1 << 20]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("1M", "1K", 2, None), "below min"),
        (("1K", "1M", 1, None), "greater than 1"),
        ((0, "1M", 2, None), "cannot grow"),
        (("1K", "1M", 2, "-1"), "sizes.step"),
        (("ten", "1M", 2, None), "sizes.min"),
        (("1K", "1Q", 2, None), "sizes.max"),
    ],
)
def test_bad_sizes(args: tuple, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InputError, match=message):
        size_steps(*args)
