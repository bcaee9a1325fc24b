from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.topology.bandwidth import (
    NVLINK_BY_VERSION,
    LineRate,
    expected_host_gbps,
    expected_pair_gbps,
    host_rate,
    nvlink_rate,
    pair_rate,
    path_rate,
    pcie_peer,
    pcie_rate,
    staged,
)
from gpulane.topology.build import Inputs, build
from gpulane.topology.lspci import parse_lspci_tree, parse_lspci_verbose
from gpulane.topology.model import Topology
from gpulane.topology.nvlink import parse_nvlink_status
from gpulane.topology.smi_query import parse_smi_query
from gpulane.topology.sysfs import SysfsDevice, read_device, upstream_links
from gpulane.topology.topo_matrix import parse_topo_matrix
from tests.topology.helpers import H200, LSPCI, TOPO, text
from tests.topology.test_sysfs import fake_riser


def h200() -> Inputs:
    return Inputs(
        matrix=parse_topo_matrix(text(f"{H200}/topo-m.txt")),
        smi=parse_smi_query(text(f"{H200}/nvidia-smi-q.txt")),
        nvlink=parse_nvlink_status(text(f"{H200}/nvlink-s.txt")),
    )


def test_h200x2_nv18_and_gen5_x16() -> None:
    topo = build(h200())
    assert expected_pair_gbps(topo, "GPU0", "GPU1") == pytest.approx(18 * 26.562)
    assert expected_host_gbps(topo, "GPU0") == pytest.approx(16 * 3.938)
    assert topo.warnings == []


def test_nvlink_rate_from_model_when_not_measured() -> None:
    inp = h200()
    inp.nvlink = None
    topo = build(inp)
    assert expected_pair_gbps(topo, "GPU1", "GPU0") == pytest.approx(18 * 26.5625)


def test_unknown_without_links() -> None:
    topo = build(
        Inputs(matrix=parse_topo_matrix(text(f"{TOPO}/delos_4xV100_mixed_NV2_NV1_SYS_tabs.txt")))
    )
    assert expected_host_gbps(topo, "GPU0") is None
    assert expected_pair_gbps(topo, "GPU0", "GPU3") is None  # SYS, no PCIe links known
    assert expected_pair_gbps(topo, "GPU0", "GPU1") is None  # NV2, no rate, no model


def test_riser_narrowest_upstream(tmp_path: Path) -> None:
    fake_riser(tmp_path)
    gpu = read_device("0000:03:00.0", tmp_path)
    assert gpu is not None
    sysfs = {gpu.bus_id: gpu}
    for link in upstream_links(gpu.bus_id, tmp_path):
        assert link.bus_id is not None
        sysfs[link.bus_id] = SysfsDevice(bus_id=link.bus_id, link=link)
    topo = build(Inputs(sysfs=sysfs))
    assert [g.name for g in topo.gpus] == ["GPU0"]
    # Gen4 x16 card, but the slot above is Gen3 x4: 4 lanes at Gen3.
    assert expected_host_gbps(topo, "GPU0") == pytest.approx(4 * 0.985)
    assert any("narrows to x4" in w for w in topo.warnings)
    assert any("0000:01:00.0" in w and "downtrained" in w for w in topo.warnings)


def test_rk3588_riser_from_lspci() -> None:
    devs = parse_lspci_verbose(
        text(f"{LSPCI}/rk3588_rtx3090_lspci_vvvv_8GT_x4_downgraded_tabs.txt")
    )
    topo = build(Inputs(lspci=devs))
    (g,) = topo.gpus
    assert g.bus_id == "0000:01:00.0" and g.pcie is not None and g.pcie.downtrained
    assert expected_host_gbps(topo, "GPU0") == pytest.approx(4 * 0.985)  # width lost: held at Gen3
    assert topo.warnings[0].startswith(
        "GPU0: PCIe link at Gen3 x4, capable of Gen4 x16 (downtrained)"
    )


def test_idle_speed_only() -> None:
    devs = parse_lspci_verbose(
        text(f"{LSPCI}/neuropoly_4xA6000_lspci_vvd_10de_downgraded_2.5GT.txt")
    )
    topo = build(Inputs(lspci=devs))
    assert [g.bus_id for g in topo.gpus] == ["01:00.0", "41:00.0", "81:00.0", "c1:00.0"]
    assert expected_host_gbps(topo, "GPU2") == pytest.approx(16 * 1.969)  # Gen4 x16 under load
    w = [x for x in topo.warnings if x.startswith("GPU0:")]
    assert w and "Gen1 x16, capable of Gen4 x16" in w[0] and "idle GPU" in w[0]


def test_lspci_tree_with_verbose() -> None:
    tree = parse_lspci_tree(text(f"{LSPCI}/stelline_asus_esc8000a_e12_lspci_tv.txt"))
    devs = parse_lspci_verbose(text(f"{LSPCI}/stelline_asus_rtx6000ada_lspci_vvv_01_00.0.txt"))
    topo = build(
        Inputs(
            matrix=parse_topo_matrix(text(f"{TOPO}/stelline_asus_4xRTX6000Ada_node_sys_4nics.txt")),
            lspci=devs,
            trees=[tree],
        )
    )
    g0 = topo.gpu("GPU0")
    assert g0 is not None and g0.bus_id == "0000:01:00.0"  # PCI bus order in the tree
    assert [g.bus_id for g in topo.gpus] == [
        "0000:01:00.0",
        "0000:41:00.0",
        "0000:c1:00.0",
        "0000:e1:00.0",
    ]
    assert g0.pcie is not None and (g0.pcie.gen, g0.pcie.gen_max) == (1, 4)
    assert [u.bus_id for u in g0.upstream] == ["0000:00:01.1"]
    assert expected_host_gbps(topo, "GPU0") == pytest.approx(16 * 1.969)
    g1 = topo.gpu("GPU1")
    assert g1 is not None and g1.pcie is None and g1.upstream[0].bus_id == "0000:40:01.1"
    assert expected_host_gbps(topo, "GPU1") is None  # no lspci -vvv for it
    assert any("PCI bus order" in w for w in topo.warnings)


def test_line_rates_after_encoding() -> None:
    gen5 = pcie_rate(5, 16)
    assert gen5 == LineRate(16 * 3.938, "PCIe Gen5 x16", "topology")  # 63.008 GB/s
    assert pcie_rate(4, 4, "nvml") == LineRate(4 * 1.969, "PCIe Gen4 x4", "nvml")
    assert pcie_rate(None, 16) is None and pcie_rate(4, None) is None
    assert pcie_rate(9, 16) is None  # unknown generation: no figure, not a guess
    assert nvlink_rate(18, 26.5625) == LineRate(18 * 26.5625, "NV18")  # 478.125 GB/s
    assert nvlink_rate(12, NVLINK_BY_VERSION[3]) == LineRate(12 * 25.0, "NV12")  # A100
    assert nvlink_rate(0, 25.0) is None and nvlink_rate(4, None) is None


def test_staged_and_peer_take_the_slower_link() -> None:
    a = LineRate(63.0, "PCIe Gen5 x16")
    b = LineRate(15.75, "PCIe Gen4 x8")
    assert staged(a, b) == staged(b, a) == LineRate(15.75, "PCIe Gen4 x8 (staged through host)")
    assert pcie_peer(a, b) == LineRate(15.75, "PCIe Gen4 x8 (PCIe peer)")
    assert staged(a, None) is None and pcie_peer(None, b) is None
    # Equal rates: the source GPU's link is the one named.
    nvml = LineRate(63.0, "PCIe Gen5 x16", "nvml")
    assert staged(nvml, a) == LineRate(63.0, "PCIe Gen5 x16 (staged through host)", "nvml")
    assert pcie_peer(a, nvml) == LineRate(63.0, "PCIe Gen5 x16 (PCIe peer)", "topology")


def test_h200x2_rates_with_their_labels() -> None:
    topo = build(h200())
    assert host_rate(topo, "GPU1") == LineRate(16 * 3.938, "PCIe Gen5 x16")
    assert pair_rate(topo, "GPU0", "GPU1") == LineRate(18 * 26.562, "NV18")
    assert pair_rate(topo, "GPU1", "GPU0", peer_access=False) == LineRate(
        16 * 3.938, "PCIe Gen5 x16 (staged through host)"
    )
    assert path_rate(topo, ["GPU0", "GPU1"]) == LineRate(18 * 26.562, "NV18")
    assert path_rate(topo, ["GPU0", "GPU1"], "NV4") == LineRate(4 * 26.562, "NV4")
    assert path_rate(topo, ["GPU0", "GPU1"], "NET") is None  # between nodes: not the topology's
    assert path_rate(topo, ["GPU0"]) is None  # one GPU has no path
    assert host_rate(topo, "GPU5") is None and pair_rate(topo, "GPU0", "GPU5") is None


def _one_gpu(link: dict[str, int | None], above: dict[str, int | None] | None = None) -> Topology:
    gpu: dict[str, object] = {"name": "GPU0", "pcie": link}
    if above is not None:
        gpu["pcie_upstream"] = [above]
    return Topology.from_json({"gpus": [gpu]})


@pytest.mark.parametrize(
    ("gen", "width", "expected"),
    [
        (1, 16, 16 * 1.969),  # idle: reads Gen1, reaches Gen4
        (4, 16, 16 * 1.969),
        (1, 15, 15 * 0.25),  # lost a lane: held at what it reads
        (3, 8, 8 * 0.985),  # x8 in an x16 slot at Gen3: a riser or slot, not idling
        (4, 32, 32 * 1.969),
    ],
)
def test_reachable_generation(gen: int, width: int, expected: float) -> None:
    """The generation a link can reach (an idle GPU downclocks), unless it also lost width."""
    topo = _one_gpu({"gen": gen, "gen_max": 4, "width": width, "width_max": 16})
    assert expected_host_gbps(topo, "GPU0") == pytest.approx(expected)


def test_port_above_caps_the_generation() -> None:
    link = {"gen": 1, "gen_max": 5, "width": 16, "width_max": 16}
    topo = _one_gpu(link, {"gen": 4, "gen_max": 4, "width": 16, "width_max": 16})
    assert host_rate(topo, "GPU0") == LineRate(16 * 1.969, "PCIe Gen4 x16")
    narrow = _one_gpu(link, {"gen": 5, "gen_max": 5, "width": 4, "width_max": 4})
    assert host_rate(narrow, "GPU0") == LineRate(4 * 3.938, "PCIe Gen5 x4")


def test_collective_on_pcie_takes_the_slowest_gpu() -> None:
    gpus = [
        {"name": "GPU0", "pcie": {"gen": 4, "gen_max": 4, "width": 16, "width_max": 16}},
        {"name": "GPU1", "pcie": {"gen": 3, "gen_max": 4, "width": 4, "width_max": 16}},
        {"name": "GPU2", "pcie": None},
    ]
    pairs = [
        {"a": "GPU0", "b": "GPU1", "label": "PXB"},
        {"a": "GPU0", "b": "GPU2", "label": "PHB"},
        {"a": "GPU1", "b": "GPU2", "label": "NV4"},
    ]
    topo = Topology.from_json({"gpus": gpus, "pairs": pairs})
    assert path_rate(topo, ["GPU0", "GPU1"]) == LineRate(4 * 0.985, "PCIe Gen3 x4")
    assert pair_rate(topo, "GPU1", "GPU0") == LineRate(4 * 0.985, "PCIe Gen3 x4 (PCIe peer)")
    assert path_rate(topo, ["GPU0", "GPU2"]) is None  # GPU2's link is unknown
    assert path_rate(topo, ["GPU0", "GPU1", "GPU2"], "SOC") is None  # read as SYS: same
    # NV4 with neither measured speeds nor a model: no per-link rate, so no figure.
    assert pair_rate(topo, "GPU1", "GPU2") is None
