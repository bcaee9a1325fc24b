from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.topology.bandwidth import expected_host_gbps, expected_pair_gbps
from gpulane.topology.build import Inputs, build
from gpulane.topology.lspci import parse_lspci_tree, parse_lspci_verbose
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
