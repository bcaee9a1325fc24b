from __future__ import annotations

import pytest

from gpulane.errors import InputError
from gpulane.topology.build import Inputs, build
from gpulane.topology.paths import (
    label_kind,
    normalize_label,
    nvlink_count,
    path_label,
    worst_label,
)
from gpulane.topology.topo_matrix import parse_topo_matrix
from tests.topology.helpers import OLD_SOC, TOPO, text


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


def test_path_label_is_the_worst_pair() -> None:
    """Four V100s joined by NV2, NV1 and SYS: each pair is its own label, a group its worst."""
    topo = build(
        Inputs(matrix=parse_topo_matrix(text(f"{TOPO}/delos_4xV100_mixed_NV2_NV1_SYS_tabs.txt")))
    )
    assert path_label(topo, ["GPU0", "GPU1"]) == "NV2"
    assert path_label(topo, ["GPU3", "GPU1"]) == "NV1"
    assert path_label(topo, ["GPU0", "GPU3"]) == "SYS"
    assert path_label(topo, ["GPU0", "GPU2", "GPU3"]) == "SYS"
    assert path_label(topo, ["GPU1", "GPU3", "GPU1"]) == "NV1"  # repeats do not count
    labels = {(p.a, p.b): p.label for p in topo.gpu_pairs()}
    for (a, b), label in labels.items():
        assert path_label(topo, [a, b]) == path_label(topo, [b, a]) == label
    assert path_label(topo, topo.gpu_names()) == "SYS"  # some pair crosses the CPUs


def test_path_label_unknown() -> None:
    topo = build(Inputs(matrix=parse_topo_matrix(OLD_SOC)))
    assert path_label(topo, ["GPU0", "GPU2"]) == "SYS"  # SOC read as SYS
    assert path_label(topo, ["GPU0"]) is None  # one GPU: no path
    assert path_label(topo, ["GPU0", "GPU9"]) is None  # a pair the topology lacks
    assert path_label(None, ["GPU0", "GPU1"]) is None
    topo.pair("GPU0", "GPU1").label = ""  # type: ignore[union-attr]  # only P2P files named it
    assert path_label(topo, ["GPU0", "GPU1", "GPU2"]) is None
