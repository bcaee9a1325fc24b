from __future__ import annotations

import pytest

from gpulane.errors import InputError
from gpulane.units import format_size, nvlink_gbps, parse_size, pcie_gbps, pcie_gen_from_gts


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
