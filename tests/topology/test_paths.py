from __future__ import annotations

import pytest

from gpulane.errors import InputError
from gpulane.topology.build import Inputs, build
from gpulane.topology.paths import (
    best_label,
    is_label,
    label_badness,
    label_from_nvml_level,
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


# -- the rest of the module's promises, each on both sides (killing its mutants) -------
def test_best_label_order() -> None:
    assert best_label(["NV2", "NV18", "PIX"]) == "NV18"
    assert best_label(["SYS", "NODE", "NET"]) == "NODE"
    assert best_label(iter(["SOC", "PHB"])) == "PHB"
    with pytest.raises(InputError, match=r"^no path labels to compare$"):
        best_label([])
    with pytest.raises(InputError, match="'FOO' is not a path label"):
        best_label(["PIX", "FOO"])


def test_error_messages_name_the_input() -> None:
    with pytest.raises(InputError) as err:
        normalize_label(" nv1 ")
    assert str(err.value) == (
        "'nv1' is not a path label (expected NV#, PIX, PXB, PHB, NODE, SYS, NET)"
    )
    with pytest.raises(InputError, match=r"^no path labels to compare$"):
        worst_label([])


@pytest.mark.parametrize(
    ("level", "label"),
    [
        (0, "PIX"),
        (10, "PIX"),
        (20, "PXB"),
        (30, "PHB"),
        (40, "NODE"),
        (50, "SYS"),
        (60, None),
        (5, None),
    ],
)
def test_label_from_nvml_level(level: int, label: str | None) -> None:
    assert label_from_nvml_level(level) == label


def test_badness_sorts_every_label() -> None:
    order = ["NV18", "NV4", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS", "NET"]
    assert sorted(reversed(order), key=label_badness) == order
    assert label_badness("SOC") == label_badness("SYS")


@pytest.mark.parametrize(
    ("token", "ok"),
    [
        ("NV1", True),
        ("NV99", True),
        ("NV0", False),
        ("NV100", False),
        ("SOC", True),
        ("NET", True),
        ("X", False),
        (" PIX", False),
    ],
)
def test_is_label(token: str, ok: bool) -> None:
    assert is_label(token) is ok


def test_path_label_needs_two_gpus_and_every_pair() -> None:
    topo = build(
        Inputs(matrix=parse_topo_matrix(text(f"{TOPO}/delos_4xV100_mixed_NV2_NV1_SYS_tabs.txt")))
    )
    assert path_label(None, ["GPU0", "GPU1"]) is None
    assert path_label(topo, ["GPU0", "GPU0"]) is None  # one distinct GPU
    assert path_label(topo, ["GPU0", "GPU9"]) is None  # a pair the topology lacks
    assert path_label(topo, ["GPU0", "GPU1", "GPU3"]) == "SYS"
