"""Topology.from_json, the one reader of the topology JSON: round trips on topologies built
from real captures, and one-line errors naming the bad field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpulane.errors import InputError
from gpulane.topology.build import Inputs, build
from gpulane.topology.files import CaptureFiles, from_files
from gpulane.topology.lspci import parse_lspci_tree, parse_lspci_verbose
from gpulane.topology.model import Topology, as_topology
from gpulane.topology.topo_matrix import parse_topo_matrix
from tests.conftest import fixture_path
from tests.topology.helpers import H200, LSPCI, OLD_SOC, TOPO, text


def h200x2() -> Topology:
    """Every capture of the 2x H200 box, as `gpulane topo --json` reads them."""
    return from_files(
        CaptureFiles(
            topo_file=str(fixture_path(f"{H200}/topo-m.txt")),
            smi_q_file=str(fixture_path(f"{H200}/nvidia-smi-q.txt")),
            nvlink_file=str(fixture_path(f"{H200}/nvlink-s.txt")),
            sysfs_file=str(fixture_path(f"{H200}/sysfs-pci.txt")),
            p2p_file=[str(fixture_path(f"{H200}/topo-p2p-{m}.txt")) for m in "rwnap"],
        )
    )


def round_trip(topo: Topology) -> None:
    data = json.loads(json.dumps(topo.to_json()))  # as written to and read from a file
    back = Topology.from_json(data)
    assert back.to_json() == data
    # and the model holds what the JSON said, not only the same text
    assert [(g.name, g.index, g.pcie and g.pcie.to_json()) for g in back.gpus] == [
        (g.name, g.index, g.pcie and g.pcie.to_json()) for g in topo.gpus
    ]
    assert [(p.a, p.b, p.label, p.kind) for p in back.pairs] == [
        (p.a, p.b, p.label, p.kind) for p in topo.pairs
    ]


def test_h200x2_round_trip() -> None:
    topo = h200x2()
    round_trip(topo)
    back = Topology.from_json(topo.to_json())
    assert back.gpu("GPU1") is not None and back.gpu("GPU1").nvlink_gbps[17] == 26.562
    pair = back.pair("GPU1", "GPU0")
    assert pair is not None and (pair.label, pair.kind, pair.nvlinks) == ("NV18", "nvlink", 18)
    assert pair.p2p["read"] == "OK" and pair.expected_gbps == pytest.approx(478.116)
    assert back.sources == topo.sources and back.missing == topo.missing


@pytest.mark.parametrize(
    "name",
    # every `nvidia-smi topo -m` capture (not the topo -p2p one)
    sorted(
        p.name for p in fixture_path(TOPO).iterdir() if p.suffix == ".txt" and "_p2p_" not in p.name
    ),
)
def test_public_matrices_round_trip(name: str) -> None:
    """GPU-NIC pairs, NIC legends, NV1..NV12, SOC read as SYS: everything comes back."""
    topo = build(Inputs(matrix=parse_topo_matrix(text(f"{TOPO}/{name}"), name)))
    round_trip(topo)


def test_nics_and_nic_pairs() -> None:
    topo = build(
        Inputs(matrix=parse_topo_matrix(text(f"{TOPO}/xst_8xA100_NV12_17nics_bond_nic_legend.txt")))
    )
    back = Topology.from_json(topo.to_json())
    assert len(back.nics) == 17 and back.nics[0].device is not None
    gpu_nic = [p for p in back.pairs if p.a.startswith("GPU") != p.b.startswith("GPU")]
    assert gpu_nic and len(back.gpu_pairs()) == 8 * 7 // 2
    # NIC-NIC pairs are read as well when a file carries them.
    data = topo.to_json()
    data["pairs"].append({"a": "NIC0", "b": "NIC1", "label": "PIX", "kind": "pix", "nvlinks": None})
    assert Topology.from_json(data).pair("NIC1", "NIC0") is not None


def test_soc_keeps_its_original() -> None:
    topo = build(Inputs(matrix=parse_topo_matrix(OLD_SOC)))
    back = Topology.from_json(topo.to_json())
    p = back.pair("GPU0", "GPU2")
    assert p is not None and (p.label, p.original, p.kind) == ("SYS", "SOC", "sys")
    # A hand-written file with the old label: read as SYS, the original kept.
    data = {"gpus": [], "pairs": [{"a": "GPU0", "b": "GPU1", "label": "SOC"}]}
    p = Topology.from_json(data).pairs[0]
    assert (p.label, p.original, p.kind) == ("SYS", "SOC", "sys")


def test_upstream_links_round_trip(tmp_path: Path) -> None:
    tree = parse_lspci_tree(text(f"{LSPCI}/stelline_asus_esc8000a_e12_lspci_tv.txt"))
    devs = parse_lspci_verbose(text(f"{LSPCI}/stelline_asus_rtx6000ada_lspci_vvv_01_00.0.txt"))
    matrix = parse_topo_matrix(text(f"{TOPO}/stelline_asus_4xRTX6000Ada_node_sys_4nics.txt"))
    topo = build(Inputs(matrix=matrix, lspci=devs, trees=[tree]))
    round_trip(topo)
    g0 = Topology.from_json(topo.to_json()).gpu("GPU0")
    assert g0 is not None and [u.bus_id for u in g0.upstream] == ["0000:00:01.1"]
    assert g0.pcie is not None and (g0.pcie.gen, g0.pcie.gen_max) == (1, 4)


def test_sparse_files_and_lookups() -> None:
    """Older or hand-made files: missing fields are null, index from the name."""
    topo = Topology.from_json({"gpus": [{"name": "GPU3"}, {}], "pairs": []})
    assert [(g.name, g.index, g.pcie) for g in topo.gpus] == [("GPU3", 3, None), ("GPU1", 1, None)]
    assert topo.gpu("GPU3") is topo.gpus[0] and topo.gpu("GPU7") is None
    renamed = Topology.from_json({"gpus": [{"name": "gpu-a", "index": 2}]})
    assert renamed.gpu("GPU2") is renamed.gpus[0]  # rows name GPUs by index
    assert as_topology(None) is None and as_topology({}) is None and as_topology(topo) is topo


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "topology: expected an object"),
        ({"pairs": []}, "expected an object with a 'gpus' list"),
        ({"gpus": [{"pcie": {"gen": "five"}}]}, r"gpus\[0\]\.pcie\.gen: expected an integer"),
        ({"gpus": [{"pcie": {"gen": True}}]}, r"gpus\[0\]\.pcie\.gen: expected an integer"),
        ({"gpus": [{"nvlinks": {"x": 25.0}}]}, r"gpus\[0\]\.nvlinks"),
        ({"gpus": [{"nvlinks": {"0": "fast"}}]}, r"gpus\[0\]\.nvlinks\.0: expected a number"),
        (
            {"gpus": [], "pairs": [{"a": "GPU0", "label": "NV2"}]},
            r"pairs\[0\]: a pair needs a and b",
        ),
        (
            {"gpus": [], "pairs": [{"a": "GPU0", "b": "GPU1", "label": "FAST"}]},
            r"pairs\[0\]\.label",
        ),
        (
            {"gpus": [{"pcie": {"downtrained": "yes"}}]},
            r"downtrained: expected true, false or null",
        ),
        ({"gpus": [], "warnings": "none"}, r"warnings: expected a list"),
    ],
)
def test_bad_fields_are_named(data: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Topology.from_json(data)
