from __future__ import annotations

import pytest

from gpulane.errors import ParseError
from gpulane.topology.lspci import parse_lspci_tree, parse_lspci_verbose
from tests.topology.helpers import LSPCI, tabs_to_spaces, text, to_crlf


def gpu(devices):
    return [d for d in devices if d.is_nvidia_gpu]


def test_neuropoly_idle_downgraded() -> None:
    devs = parse_lspci_verbose(
        text(f"{LSPCI}/neuropoly_4xA6000_lspci_vvd_10de_downgraded_2.5GT.txt")
    )
    gpus = gpu(devs)
    assert [d.bus_id for d in gpus] == ["01:00.0", "41:00.0", "81:00.0", "c1:00.0"]
    for d in gpus:
        assert (d.cap_gts, d.cap_width, d.sta_gts, d.sta_width) == (16.0, 16, 2.5, 16)
        assert d.speed_downgraded and not d.width_downgraded
        link = d.link()
        assert link is not None
        assert (link.gen, link.gen_max, link.width, link.width_max, link.downtrained) == (
            1,
            4,
            16,
            16,
            True,
        )
    assert len(devs) == 8  # with the HDMI audio functions


def test_rk3588_x4_riser() -> None:
    (d,) = parse_lspci_verbose(
        text(f"{LSPCI}/rk3588_rtx3090_lspci_vvvv_8GT_x4_downgraded_tabs.txt")
    )
    assert d.bus_id == "0000:01:00.0" and d.is_nvidia_gpu
    assert (d.cap_gts, d.cap_width, d.sta_gts, d.sta_width) == (16.0, 16, 8.0, 4)
    assert d.speed_downgraded and d.width_downgraded
    link = d.link()
    assert link is not None and (link.gen, link.gen_max, link.width, link.width_max) == (
        3,
        4,
        4,
        16,
    )


def test_rk3568_x1_domain() -> None:
    text_ = text(f"{LSPCI}/rk3568_rtx3090_lspci_vvvv_2.5GT_x1_downgraded_tabs.txt")
    (d,) = parse_lspci_verbose(text_)
    assert d.bus_id == "0002:21:00.0"
    assert (d.sta_gts, d.sta_width, d.cap_gts, d.cap_width) == (2.5, 1, 16.0, 16)
    assert d.width_downgraded
    (d2,) = parse_lspci_verbose(tabs_to_spaces(to_crlf(text_)))
    assert (d2.sta_gts, d2.sta_width) == (2.5, 1)


def test_stelline_gpu_no_ok_suffix_and_nic() -> None:
    (d,) = parse_lspci_verbose(text(f"{LSPCI}/stelline_asus_rtx6000ada_lspci_vvv_01_00.0.txt"))
    assert d.bus_id == "01:00.0" and d.numa == 0
    assert (d.sta_gts, d.sta_width, d.speed_downgraded, d.width_downgraded) == (
        2.5,
        16,
        True,
        False,
    )
    assert d.name == "NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]"
    (n,) = parse_lspci_verbose(text(f"{LSPCI}/stelline_asus_connectx7_lspci_vvv_21_00.0.txt"))
    link = n.link()
    assert link is not None and (link.gen, link.gen_max, link.width, link.downtrained) == (
        5,
        5,
        16,
        False,
    )
    assert not n.is_nvidia_gpu


def test_tree_plx_fragment() -> None:
    t = parse_lspci_tree(text(f"{LSPCI}/l2fwd_nv_lspci_tv_plx_switch_nic_gpu_FRAGMENT.txt"))
    gpu_node = t.find("b6:00.0")
    assert gpu_node is not None and "V100" in (gpu_node.name or "")
    assert [n.bus_id for n in t.chain("0000:b6:00.0")] == [
        "0000:b4:10.0",
        "0000:b3:00.0",
        "0000:b2:00.0",
    ]
    assert [n.bus_id for n in t.chain("b5:00.1")] == [
        "0000:b4:08.0",
        "0000:b3:00.0",
        "0000:b2:00.0",
    ]
    # NIC and GPU share the switch behind b3:00.0 (PIX in nvidia-smi's words).
    assert t.chain("b6:00.0")[1:] == t.chain("b5:00.0")[1:]


def test_tree_esc8000() -> None:
    t = parse_lspci_tree(text(f"{LSPCI}/stelline_asus_esc8000a_e12_lspci_tv.txt"))
    gpus = sorted(n.bus_id for n in t.nodes.values() if n.name and "RTX 6000 Ada" in n.name)
    assert gpus == ["0000:01:00.0", "0000:41:00.0", "0000:c1:00.0", "0000:e1:00.0"]
    assert [n.bus_id for n in t.chain("01:00.0")] == ["0000:00:01.1"]
    assert [n.bus_id for n in t.chain("e1:00.0")] == ["0000:e0:01.1"]
    nvme = t.find("0000:65:00.0")
    assert nvme is not None and "NVMe" in (nvme.name or "")
    assert [n.bus_id for n in t.chain("65:00.0")] == [
        "0000:64:10.0",
        "0000:63:00.0",
        "0000:62:00.0",
        "0000:61:00.0",
        "0000:60:01.1",
    ]
    empty = t.find("0000:70:15.0")  # a bridge with nothing behind it
    assert empty is not None and empty.secondary == 0x72 and t.find("0000:72:00.0") is None


def test_tree_puget() -> None:
    t = parse_lspci_tree(text(f"{LSPCI}/stelline_puget_wrx90_lspci_tv.txt"))
    assert [n.bus_id for n in t.chain("c2:00.0")] == ["0000:c0:03.1"]
    assert [n.bus_id for n in t.chain("21:00.1")] == ["0000:20:01.1"]
    assert [n.bus_id for n in t.chain("8d:00.0")] == [
        "0000:8c:0c.0",
        "0000:8b:00.0",
        "0000:20:03.4",
    ]


def test_errors() -> None:
    with pytest.raises(ParseError, match="topo -m"):
        parse_lspci_verbose(text("h200x2/topo-m.txt"), "l")
    with pytest.raises(ParseError, match="lspci -tv"):
        parse_lspci_tree(text("h200x2/topo-m.txt"), "l")
    with pytest.raises(ParseError, match="empty"):
        parse_lspci_verbose("", "l")
    bad = text(f"{LSPCI}/stelline_asus_rtx6000ada_lspci_vvv_01_00.0.txt").replace(
        "Speed 2.5GT/s", "Speed 3GT/s"
    )
    with pytest.raises(ParseError, match="not a PCIe rate") as e:
        parse_lspci_verbose(bad, "l")
    assert e.value.line == 30
    t = text(f"{LSPCI}/stelline_puget_wrx90_lspci_tv.txt").replace(
        " |           +-02.0", "            ?-02.0", 1
    )
    with pytest.raises(ParseError):
        parse_lspci_tree(t, "l")


@pytest.mark.parametrize(
    "tail",
    ["(p", "(prog-if 00 [VGA", "(rev a", "(rev a1)X (prog-if 00 [VGA controller])", "(rev a1)"],
)
def test_a_device_name_stops_before_its_suffixes_even_cut_or_mixed(tail: str) -> None:
    # found by the fuzz test: a line cut inside "(prog-if" gave the name "... (p"
    line = f"01:00.0 VGA compatible controller: NVIDIA Corporation GA102GL [RTX A6000] {tail}"
    (dev,) = parse_lspci_verbose(line)
    assert dev.name == "NVIDIA Corporation GA102GL [RTX A6000]"
