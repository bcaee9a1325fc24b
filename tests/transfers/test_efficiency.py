from __future__ import annotations

import copy

import pytest

from gpulane.topology.bandwidth import LineRate
from gpulane.topology.model import Topology
from gpulane.transfers.efficiency import Expected, efficiency

H200X2 = {
    "gpus": [
        {"name": "GPU0", "index": 0, "bus_id": "0000:00:06.0", "numa": 0, "model": "NVIDIA H200",
         "pcie": {"gen": 5, "gen_max": 5, "width": 16, "width_max": 16, "downtrained": False}},
        {"name": "GPU1", "index": 1, "bus_id": "0000:00:07.0", "numa": 0, "model": "NVIDIA H200",
         "pcie": {"gen": 5, "gen_max": 5, "width": 16, "width_max": 16, "downtrained": False}},
    ],
    "nics": [{"name": "NIC0", "device": "mlx5_0"}],
    "pairs": [
        {"a": "GPU0", "b": "GPU1", "label": "NV18", "kind": "nvlink", "nvlinks": 18},
        {"a": "GPU0", "b": "NIC0", "label": "PHB", "kind": "phb", "nvlinks": None},
    ],
    "warnings": [],
}  # fmt: skip


def test_efficiency_arithmetic() -> None:
    # The reference figures on 2xH200.
    assert efficiency(55.5, 63.008) == pytest.approx(0.8808, abs=1e-4)
    assert efficiency(394.0, 478.125) == pytest.approx(0.8241, abs=1e-4)
    assert efficiency(None, 63.0) is None
    assert efficiency(10.0, None) is None
    assert efficiency(10.0, 0.0) is None


def test_from_topology() -> None:
    exp = Expected.from_topology(Topology.from_json(H200X2))
    host = exp.host_link("GPU0")
    assert host is not None and host.gbps == pytest.approx(63.008)
    assert (host.label, host.source) == ("PCIe Gen5 x16", "topology")
    on = exp.pair_link("GPU1", "GPU0", peer_access=True)
    # H200: NVLink4's 26.5625 GB/s per link (the model's rate: no speeds in this file)
    assert on is not None and on.gbps == pytest.approx(478.125) and on.label == "NV18"
    off = exp.pair_link("GPU0", "GPU1", peer_access=False)
    assert off is not None and off.gbps == pytest.approx(63.008)
    assert "staged through host" in off.label
    assert ("GPU0", "NIC0") not in exp.pairs
    total = exp.all_host(["GPU0", "GPU1"])
    assert total is not None and total.gbps == pytest.approx(126.016)


def test_pcie_pairs_and_unknown_fields() -> None:
    data = {
        "gpus": [
            {"name": "GPU0", "pcie": {"gen": 4, "width": 16}},
            {"name": "GPU1", "pcie": {"gen": 3, "width": 4}},  # the x4 riser
            {"name": "GPU2", "pcie": {"gen": None, "width": None}},
        ],
        "pairs": [
            {"a": "GPU0", "b": "GPU1", "label": "PXB", "kind": "pxb", "nvlinks": None},
            {"a": "GPU0", "b": "GPU2", "label": "SYS", "kind": "sys", "nvlinks": None},
            {"a": "GPU1", "b": "GPU2", "label": "NV4", "kind": None, "nvlinks": None},
        ],
    }
    exp = Expected.from_topology(Topology.from_json(data))
    p01 = exp.pair_link("GPU0", "GPU1", True)
    assert p01 is not None and p01.gbps == pytest.approx(0.985 * 4)  # the slower link
    assert p01.label == "PCIe Gen3 x4 (PCIe peer)"
    assert exp.pair_link("GPU0", "GPU2", True) is None  # GPU2's link is unknown
    # NV4 with no link speeds and no GPU model: no per-link rate, so no figure (this used to
    # assume NVLink4's 26.5625 GB/s per link, 6% high for an A100).
    assert exp.pair_link("GPU2", "GPU1", True) is None
    assert exp.host_link("GPU2") is None
    assert exp.all_host(["GPU0", "GPU2"]) is None
    data["gpus"][2]["model"] = "NVIDIA A100-SXM4-40GB"
    nv = Expected.from_topology(Topology.from_json(data)).pair_link("GPU2", "GPU1", True)
    assert nv == LineRate(4 * 25.0, "NV4")


def test_idle_link_reads_gen1_but_reaches_its_maximum() -> None:
    """The topology taken at rest reads Gen1 on an idle H200; a copy runs at Gen5."""
    data = copy.deepcopy(H200X2)
    data["gpus"][0]["pcie"].update(gen=1, downtrained=True)
    host = Expected.from_topology(Topology.from_json(data)).host_link("GPU0")
    assert host == LineRate(16 * 3.938, "PCIe Gen5 x16")


def test_staged_needs_both_links() -> None:
    exp = Expected(host={"GPU0": LineRate(63.0, "PCIe Gen5 x16")})
    assert exp.pair_link("GPU0", "GPU1", False) is None
    exp.host["GPU1"] = LineRate(15.75, "PCIe Gen4 x8", "nvml")  # a busy NVML reading
    assert exp.pair_link("GPU1", "GPU0", False) == LineRate(
        15.75, "PCIe Gen4 x8 (staged through host)", "nvml"
    )
    assert Expected.from_topology(None) == Expected()
