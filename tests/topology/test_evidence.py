"""The doctor's evidence parsers on real captures: ACS lines from public threads (full
device blocks, fragments, `grep ACSCtl` lists), Xid lines, nvidia-smi output of the H200
machine; and files captured elsewhere, each absent source named."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulane.errors import InputError
from gpulane.topology.evidence import DoctorFiles, add_nccl_logs, gather_files
from gpulane.topology.evidence.acs import PciFunction, bridges_above, parse_acs
from gpulane.topology.evidence.iommu import cmdline_params, parse_groups
from gpulane.topology.evidence.kernel import parse_modules, parse_xids
from gpulane.topology.evidence.nvlink_errors import parse_nvlink_errors
from tests.conftest import fixture_path

LSPCI = Path(__file__).resolve().parents[1] / "fixtures" / "public" / "lspci"
KERNEL = Path(__file__).resolve().parents[1] / "fixtures" / "public" / "kernel"


def acs(name: str) -> list[PciFunction]:
    return parse_acs((LSPCI / name).read_text())


def test_plx_port_fragment_redirects_and_its_bus_range():
    funcs = acs("heymeco6_plx_pex8725_acs_enabled_FRAGMENT.txt")
    first, bridge = funcs
    # The ACS lines above the first device line belong to a port the excerpt does not name.
    assert first.bus_id is None and first.redirects() == ["ReqRedir", "CmpltRedir", "UpstreamFwd"]
    assert first.acs_cap["EgressCtrl"] is True
    assert bridge.bus_id == "0000:02:08.0" and bridge.is_bridge
    assert (bridge.secondary, bridge.subordinate) == (0x82, 0x82) and not bridge.acs_ctl
    assert bridges_above(funcs, "0000:82:00.0") == [bridge]
    assert bridges_above(funcs, "82:00.0") == [bridge]
    assert bridges_above(funcs, "0000:83:00.0") == []


def test_tabs_and_amd_root_ports():
    funcs = acs("systeminformation819_amd_gpp_bridge_acs_enabled_tabs_FRAGMENT.txt")
    assert funcs[0].redirects() == ["ReqRedir", "CmpltRedir", "UpstreamFwd"]
    assert (
        funcs[0].acs_line
        == "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    )
    assert funcs[1].bus_id == "0000:00:01.2" and "GPP Bridge" in funcs[1].name


def test_acs_off_on_a_port_that_could_redirect():
    (port,) = acs("openvmm3461_root_port_acs_disabled_ELIDED.txt")
    assert port.acs_cap["ReqRedir"] and port.redirects() == []
    assert (port.secondary, port.subordinate) == (0x01, 0x08)


@pytest.mark.parametrize(
    ("name", "ports", "redirecting"),
    [("nccl523_grep_acsctl_mixed_spaces.txt", 12, 7), ("nccl629_grep_acsctl_tabs.txt", 15, 4)],
)
def test_grep_output_counts_ports(name: str, ports: int, redirecting: int):
    funcs = acs(name)
    assert len(funcs) == ports and all(f.bus_id is None for f in funcs)
    assert sum(1 for f in funcs if f.redirects()) == redirecting
    # SrcValid+ alone (validation, no redirection) is not counted.
    assert any(
        f.acs_ctl.get("SrcValid") and not f.redirects()
        for f in acs("nccl523_grep_acsctl_mixed_spaces.txt")
    )


def test_full_lspci_of_gpus_without_acs():
    funcs = acs("neuropoly_4xA6000_lspci_vvd_10de_downgraded_2.5GT.txt")
    assert sum(1 for f in funcs if f.is_gpu) == 4 and not any(f.acs_ctl for f in funcs)
    nic = acs("stelline_asus_connectx7_lspci_vvv_21_00.0.txt")
    assert nic[0].is_nic and nic[0].acs_ctl and not nic[0].redirects()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_acs_reader_never_raises(text: str):
    parse_acs(text)
    parse_xids(text)
    parse_nvlink_errors(text)
    parse_groups(text)
    parse_modules(text)


def test_xids_with_and_without_pci_and_fallen_off_the_bus():
    lines = parse_xids((KERNEL / "xid_lines_nvsentinel155_and_nvidia_xid_docs.txt").read_text())
    assert [(x.bus_id, x.code) for x in lines] == [("0000:44:00", 79), ("0000:03:00", 14)]
    (fallen,) = parse_xids((KERNEL / "nvsentinel155_fallen_off_bus_no_xid_dmesg.txt").read_text())
    assert (fallen.bus_id, fallen.code) == ("0000:b3:00.0", 79)


def test_link_speeds_are_no_error_counters():
    gpus = parse_nvlink_errors(fixture_path("h200x2/nvlink-s.txt").read_text())
    assert [g.index for g in gpus] == [0, 1] and all(not g.nonzero() for g in gpus)


def test_cmdline_and_groups():
    assert cmdline_params("BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt quiet") == {
        "intel_iommu": "on", "iommu": "pt"
    }  # fmt: skip
    groups = parse_groups(
        "/sys/kernel/iommu_groups/12/type:DMA-FQ\n/sys/kernel/iommu_groups/12/devices/0000:1b:00.0\n"
    )
    assert groups.type_of("0000:1b:00.0") == "DMA-FQ" and groups.type_of("1b:00.0") == "DMA-FQ"


def test_files_of_the_h200_machine_and_what_is_absent():
    ev = gather_files(
        DoctorFiles(
            smi_q_file=str(fixture_path("h200x2/nvidia-smi-q.txt")),
            topo_file=str(fixture_path("h200x2/topo-m.txt")),
            p2p_file=[str(fixture_path("h200x2/topo-p2p-r.txt"))],
        )
    )
    assert ev.smi is not None and len(ev.smi.gpus) == 2
    assert ev.topology is not None and ev.topology.pair("GPU0", "GPU1").label == "NV18"
    assert ev.absent["lspci"] == "not given (--lspci-file)"
    assert ev.absent["rows"].startswith("no run directory given")
    assert "kernel_log" in ev.absent and "memory_peers" in ev.absent


def test_a_missing_file_is_bad_input(tmp_path):
    with pytest.raises(InputError, match=r"--lspci-file .*nope"):
        gather_files(DoctorFiles(lspci_file=str(tmp_path / "nope")))
    ev = gather_files(DoctorFiles(modules_file=str(fixture_path("h200x2/topo-m.txt"))))
    with pytest.raises(InputError, match="--nccl-log"):
        add_nccl_logs(ev, [str(tmp_path / "none.log")])
