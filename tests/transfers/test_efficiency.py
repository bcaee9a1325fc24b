from __future__ import annotations

import pytest

from gpulane.transfers.efficiency import (
    Expected,
    Link,
    efficiency,
    from_topology_json,
    nvlink_link,
    pcie_link,
    pcie_pair_link,
    staged_link,
)

H200X2 = {
    "gpus": [
        {"name": "GPU0", "index": 0, "bus_id": "0000:00:06.0", "numa": 0,
         "pcie": {"gen": 5, "gen_max": 5, "width": 16, "width_max": 16, "downtrained": False}},
        {"name": "GPU1", "index": 1, "bus_id": "0000:00:07.0", "numa": 0,
         "pcie": {"gen": 5, "gen_max": 5, "width": 16, "width_max": 16, "downtrained": False}},
    ],
    "nics": [{"name": "NIC0", "device": "mlx5_0"}],
    "pairs": [
        {"a": "GPU0", "b": "GPU1", "label": "NV18", "kind": "nvlink", "nvlinks": 18},
        {"a": "GPU0", "b": "NIC0", "label": "PHB", "kind": "phb", "nvlinks": None},
    ],
    "warnings": [],
}  # fmt: skip


def test_line_rates_after_encoding() -> None:
    gen5 = pcie_link(5, 16)
    assert gen5 is not None
    assert gen5.gbps == pytest.approx(63.008)  # 3.938 GB/s per lane x 16
    assert gen5.label == "PCIe Gen5 x16"
    gen4x4 = pcie_link(4, 4)
    assert gen4x4 is not None and gen4x4.gbps == pytest.approx(7.876)
    assert pcie_link(None, 16) is None
    assert pcie_link(9, 16) is None  # unknown generation: no figure, not a guess
    nv = nvlink_link(18)
    assert nv is not None and nv.gbps == pytest.approx(478.125) and nv.label == "NV18"
    nv3 = nvlink_link(12, version=3)
    assert nv3 is not None and nv3.gbps == pytest.approx(300.0)  # A100: 12 x 25 GB/s
    assert nvlink_link(0) is None


def test_efficiency_arithmetic() -> None:
    # The reference figures on 2xH200.
    assert efficiency(55.5, 63.008) == pytest.approx(0.8808, abs=1e-4)
    assert efficiency(394.0, 478.125) == pytest.approx(0.8241, abs=1e-4)
    assert efficiency(None, 63.0) is None
    assert efficiency(10.0, None) is None
    assert efficiency(10.0, 0.0) is None


def test_from_topology_json() -> None:
    exp = from_topology_json(H200X2)
    host = exp.host_link("GPU0")
    assert host is not None and host.gbps == pytest.approx(63.008)
    assert (host.label, host.source) == ("PCIe Gen5 x16", "topology-json")
    on = exp.pair_link("GPU1", "GPU0", peer_access=True)
    assert on is not None and on.gbps == pytest.approx(478.125) and on.label == "NV18"
    off = exp.pair_link("GPU0", "GPU1", peer_access=False)
    assert off is not None and off.gbps == pytest.approx(63.008)
    assert "staged through host" in off.label
    assert ("GPU0", "NIC0") not in exp.pairs
    total = exp.all_host(["GPU0", "GPU1"])
    assert total is not None and total.gbps == pytest.approx(126.016)


def test_pcie_pairs_and_unknown_fields() -> None:
    topo = {
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
    exp = from_topology_json(topo)
    p01 = exp.pair_link("GPU0", "GPU1", True)
    assert p01 is not None and p01.gbps == pytest.approx(0.985 * 4)  # the slower link
    assert exp.pair_link("GPU0", "GPU2", True) is None  # GPU2's link is unknown
    nv = exp.pair_link("GPU2", "GPU1", True)
    assert nv is not None and nv.label == "NV4"
    assert exp.host_link("GPU2") is None
    assert exp.all_host(["GPU0", "GPU2"]) is None


def test_staged_and_pcie_pair_need_both_links() -> None:
    a = Link(63.0, "PCIe Gen5 x16")
    b = Link(15.75, "PCIe Gen4 x8")
    assert staged_link(a, b) == Link(15.75, "PCIe Gen4 x8 (staged through host)")
    assert pcie_pair_link(a, None) is None
    assert Expected().pair_link("GPU0", "GPU1", False) is None
