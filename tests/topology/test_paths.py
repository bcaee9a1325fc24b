from __future__ import annotations

import pytest

from gpulane.errors import InputError
from gpulane.topology.paths import label_kind, normalize_label, nvlink_count, worst_label


def test_worst_label_order() -> None:
    assert worst_label(["NV18", "NV2"]) == "NV2"
    assert worst_label(["NV1", "PIX"]) == "PIX"
    assert worst_label(["PIX", "PXB", "PHB"]) == "PHB"
    assert worst_label(["PHB", "NODE"]) == "NODE"
    assert worst_label(["NODE", "SYS", "PIX"]) == "SYS"
    assert worst_label(["SYS", "NET"]) == "NET"
    assert worst_label(["NV18"]) == "NV18"
    assert worst_label(iter(["NV12", "NV12"])) == "NV12"


def test_soc_is_sys() -> None:
    assert normalize_label("SOC") == "SYS"
    assert worst_label(["SOC", "PHB"]) == "SYS"
    assert label_kind("SOC") == "sys"


def test_kinds_and_counts() -> None:
    assert label_kind("NV4") == "nvlink"
    assert label_kind("PXB") == "pxb"
    assert nvlink_count("NV18") == 18
    assert nvlink_count("SYS") is None


@pytest.mark.parametrize("bad", ["", "X", "NV0", "FOO", "nv1"])
def test_bad_labels(bad: str) -> None:
    with pytest.raises(InputError):
        worst_label([bad])


def test_empty() -> None:
    with pytest.raises(InputError):
        worst_label([])
