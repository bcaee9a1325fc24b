"""BAR1, HMM and the kernel log's IOMMU from real captures (tests/fixtures/p2p_trust/README.md)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpulane.topology.evidence.p2p_facts import parse_bar1, parse_hmm, parse_iommu_log
from tests.conftest import fixture_path

TRUST = fixture_path("p2p_trust")


def test_bar1_and_frame_buffer_of_each_h200():
    gpus = parse_bar1(fixture_path("h200x2/nvidia-smi-q.txt").read_text())
    assert len(gpus) == 2
    assert {g.bar1_mib for g in gpus} == {262144}
    assert all(g.fb_mib and g.fb_mib < 262144 for g in gpus)
    assert all(g.maps_all_memory for g in gpus)
    assert all(g.bus_id.startswith("0000:") for g in gpus)


def test_a_grep_of_bar1_blocks_without_gpu_lines():
    gpus = parse_bar1((TRUST / "ogkm510_grep_bar1_TRUNCATED.txt").read_text())
    assert [(g.bus_id, g.bar1_mib, g.fb_mib) for g in gpus] == [
        ("GPU#0", 32768, None),
        ("GPU#1", 32768, None),
    ]
    assert all(g.maps_all_memory is None for g in gpus)  # the FB is not in the grep


def test_hmm_from_sysfs_line_the_last_statement_wins():
    text = (TRUST / "omni_infinity_rtxpro6000_healthy_pcie.txt").read_text()
    hmm = parse_hmm(text)
    assert hmm.enabled is True  # "uvm_disable_hmm = N": HMM on
    assert hmm.line and "uvm_disable_hmm = N" in hmm.line
    assert parse_hmm("options nvidia_uvm uvm_disable_hmm=1").enabled is False
    assert parse_hmm("uvm_disable_hmm:Y").enabled is False
    assert parse_hmm("# options nvidia_uvm uvm_disable_hmm=1").enabled is None
    assert parse_hmm("").enabled is None


def test_iommu_faults_in_the_kernel_log():
    log = parse_iommu_log((TRUST / "cuda_samples48_amd_vi_io_page_fault_dmesg.txt").read_text())
    assert log.fault_count == 9
    assert log.mode is None  # the excerpt has no "Default domain type" line
    assert "IO_PAGE_FAULT" in log.faults[0] and "0000:07:00.0" in log.faults[0]
    assert parse_iommu_log("[0.5] iommu: Default domain type: Passthrough").mode == "passthrough"


@given(st.data())
def test_cuts_of_the_captures_never_raise_and_invent_no_number(data: st.DataObject) -> None:
    text = (TRUST / "ogkm510_grep_bar1_TRUNCATED.txt").read_text()
    cut = data.draw(st.integers(0, len(text)))
    for g in parse_bar1(text[:cut]):
        assert g.bar1_mib is None or str(g.bar1_mib) in text
    log = parse_iommu_log(
        (TRUST / "cuda_samples48_amd_vi_io_page_fault_dmesg.txt").read_text()[:cut]
    )
    assert log.fault_count <= 9
