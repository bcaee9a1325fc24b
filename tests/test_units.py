from __future__ import annotations

import pytest

from gpulane.errors import InputError
from gpulane.units import (
    format_size,
    nvlink_gbps,
    parse_size,
    pcie_gbps,
    pcie_gen_from_gts,
    size_steps,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8", 8),
        ("64K", 65536),
        ("1M", 1 << 20),
        ("8G", 8 << 30),
        ("1GB", 1 << 30),
        ("2 MiB", 2 << 20),
        (4096, 4096),
        ("0.5K", 512),
    ],
)
def test_parse_size(text: str | int, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "1.3", "-1", "1X", True, -5])
def test_parse_size_rejects(bad: object) -> None:
    with pytest.raises(InputError):
        parse_size(bad)  # type: ignore[arg-type]


def test_format_size() -> None:
    assert format_size(8) == "8 B"
    assert format_size(1 << 20) == "1 MiB"
    assert format_size(8 << 30) == "8 GiB"
    assert format_size(1536) == "1.5 KiB"


def test_line_rates() -> None:
    # Gen5 x16: 63 GB/s per direction after 128b/130b encoding
    assert pcie_gbps(5, 16) == pytest.approx(63.0, rel=1e-3)
    assert pcie_gbps(3, 4) == pytest.approx(3.94)
    assert nvlink_gbps(18) == pytest.approx(478.1, rel=1e-3)
    assert pcie_gen_from_gts(32.0) == 5
    assert pcie_gen_from_gts(2.5) == 1
    assert pcie_gen_from_gts(7.0) is None


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
def test_bad_sizes(args: tuple, message: str) -> None:
    with pytest.raises(InputError, match=message):
        size_steps(*args)
