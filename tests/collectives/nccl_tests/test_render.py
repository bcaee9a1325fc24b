"""Numbers printed as nccl-tests prints them."""

from __future__ import annotations

import pytest

from gpulane.collectives.nccl_tests.model import nccl_version_string
from gpulane.collectives.nccl_tests.render import format_float

# ------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("value", "width", "text"),
    [
        (19.11805, 7, "  19.12"),
        (24869.3407, 7, "24869.3"),
        (154383.2, 7, " 154383"),
        (12345678.0, 7, "1.2e+07"),
        (0.000418, 6, "  0.00"),
        (345.402586, 6, "345.40"),
        (1234.5, 6, "1234.5"),
        (1234567.0, 6, " 1e+06"),
    ],
)
def test_format_float_as_nccl_tests(value: float, width: int, text: str) -> None:
    assert format_float(value, width) == text


def test_nccl_version_codes() -> None:
    assert nccl_version_string(22803) == "2.28.3"
    assert nccl_version_string(2708) == "2.7.8"
    assert nccl_version_string(None) is None
