"""The P2P trust check's two pure parts on real captures (tests/fixtures/p2p_trust/README.md):
judging a pair from its P2P and host-staged runs, and naming the likely cause of a hang
or a slow pair from the evidence."""

from __future__ import annotations

import re
from pathlib import Path

from gpulane.analysis.doctor.p2p_trust import (
    ERROR,
    HANG,
    OK,
    SLOW,
    PairEvidence,
    Run,
    findings,
    infer_causes,
    judge_pair,
    pair_evidence,
)
from gpulane.collectives.nccl_tests.text import parse_text
from gpulane.topology.evidence import DoctorFiles, Evidence, gather_files
from gpulane.topology.evidence.acs import parse_acs
from gpulane.topology.evidence.p2p_facts import Bar1, parse_bar1, parse_hmm, parse_iommu_log
from tests.conftest import fixture_path

TRUST = fixture_path("p2p_trust")
PUBLIC = Path(__file__).resolve().parents[2] / "fixtures" / "public"
H200 = {
    "smi_q_file": str(fixture_path("h200x2/nvidia-smi-q.txt")),
    "topo_file": str(fixture_path("h200x2/topo-m.txt")),
    "p2p_file": [str(fixture_path(f"h200x2/topo-p2p-{mode}.txt")) for mode in "rwnap"],
}


def _last_run(name: str) -> Run:
    """The largest size of a real nccl-tests table, out of place, as a Run."""
    line = parse_text(fixture_path(f"h200x2/{name}").read_text())[0].lines[-1]
    m = line.results[0]
    return Run(OK, m.time_us / 1e6, line.size_bytes)


def _gbps_run(gbps: float) -> Run:
    return Run(OK, 1.0 / gbps, 10**9)


def _names(causes: list) -> list[str]:
    return [c.name for c in causes]


def test_healthy_nvlink_h200_pair_passes_with_no_cause():
    p2p, staged = (
        _last_run("nccl-tests-all_reduce.txt"),
        _last_run("nccl-tests-all_reduce-p2p-disabled.txt"),
    )
    result = judge_pair("GPU0", "GPU1", p2p, staged, timeout_s=20)
    assert result.outcome == OK and result.compared
    assert result.p2p_gbps and result.staged_gbps and result.p2p_gbps > 10 * result.staged_gbps
    ev = gather_files(DoctorFiles(**H200))  # type: ignore[arg-type]
    smi = fixture_path("h200x2/nvidia-smi-q.txt").read_text()
    pe = pair_evidence(ev, "GPU0", "GPU1", bar1=parse_bar1(smi))
    assert pe.label == "NV18"
    assert infer_causes(result.outcome, pe) == []
    assert findings([result]) == []


def test_healthy_pcie_pix_pair_passes():
    # 6x RTX PRO 6000 (EfficientMoE/Omni-Infinity): 2-GPU PIX all_gather busbw untuned
    # against NCCL_P2P_DISABLE=1, both read from the captured table row.
    text = (TRUST / "omni_infinity_rtxpro6000_healthy_pcie.txt").read_text()
    row = next(x for x in text.splitlines() if "all_gather" in x)
    cells = [c.strip() for c in row.strip("|").split("|")]
    untuned = float(re.match(r"[\d.]+", cells[2]).group())  # type: ignore[union-attr]
    p2p_off = float(cells[5])
    result = judge_pair("GPU0", "GPU1", _gbps_run(untuned), _gbps_run(p2p_off), 20)
    assert result.outcome == OK and result.compared


def test_a_pair_slower_than_host_staging_fails_slow():
    result = judge_pair("GPU0", "GPU1", _gbps_run(9.0), _gbps_run(10.1), 20)
    assert result.outcome == SLOW and "slow" in result.detail
    assert judge_pair("GPU0", "GPU1", _gbps_run(10.2), _gbps_run(10.1), 20).outcome == OK
    # a margin: P2P must beat staging by 20 %
    assert judge_pair("a", "b", _gbps_run(11.0), _gbps_run(10.0), 20, 1.2).outcome == SLOW


def test_hang_and_error_and_an_uncompared_pass():
    hang = judge_pair("GPU0", "GPU1", Run(HANG), None, 7)
    assert hang.outcome == HANG and "7 s" in hang.detail
    err = judge_pair("GPU0", "GPU1", Run(ERROR, error="rank 1 died"), None, 7)
    assert err.outcome == ERROR and "rank 1 died" in err.detail
    alone = judge_pair("GPU0", "GPU1", _gbps_run(20), Run(ERROR, error="x"), 7)
    assert alone.outcome == OK and not alone.compared and "no figure" in alone.detail


def test_hang_behind_acs_redirecting_amd_bridges_names_acs():
    # NVIDIA/nccl#2079: the deadlock on 2x RTX 5880 Ada was ACS on AMD GPP bridges; the
    # same bridge's ACSCtl from a public lspci (sebhildebrandt/systeminformation#819).
    text = PUBLIC / "lspci/systeminformation819_amd_gpp_bridge_acs_enabled_tabs_FRAGMENT.txt"
    ev = Evidence(host="x", live=False, pci=parse_acs(text.read_text()))
    pe = pair_evidence(ev, "GPU0", "GPU1")
    causes = infer_causes(HANG, pe)
    assert _names(causes)[0] == "acs"
    assert "ReqRedir+" in causes[0].evidence
    assert "setpci" in causes[0].fix or "noacs" in causes[0].fix


def test_acs_grep_with_redirecting_ports_names_acs():
    text = (PUBLIC / "lspci/nccl629_grep_acsctl_tabs.txt").read_text()
    pe = pair_evidence(Evidence(host="x", live=False, pci=parse_acs(text)), "GPU0", "GPU1")
    assert len(pe.acs_redirecting) == 4  # 4 of 15 ports redirect
    assert "acs" in _names(infer_causes(SLOW, pe))


def test_src_valid_alone_is_not_named_acs():
    # NVIDIA/nccl#606 (a pair that hung): ACSCtl SrcValid+ only, no redirect flag.
    text = (TRUST / "nccl606_grep_acsctl_srcvalid_only_TRUNCATED.txt").read_text()
    pe = pair_evidence(Evidence(host="x", live=False, pci=parse_acs(text)), "GPU0", "GPU1")
    causes = infer_causes(HANG, pe)
    assert _names(causes) == ["unknown"]
    assert "nvidia-smi -q (BAR1)" in causes[0].evidence  # says what was not read


def test_iommu_faults_name_the_iommu():
    log = parse_iommu_log((TRUST / "cuda_samples48_amd_vi_io_page_fault_dmesg.txt").read_text())
    pe = pair_evidence(Evidence(host="x", live=False), "GPU0", "GPU1", iommu_log=log)
    causes = infer_causes(HANG, pe)
    assert _names(causes) == ["iommu"]
    assert "9 IOMMU fault" in causes[0].evidence and "iommu=pt" in causes[0].fix


def test_hmm_is_named_for_a_hang_not_for_a_slow_pair():
    hmm = parse_hmm((TRUST / "omni_infinity_rtxpro6000_healthy_pcie.txt").read_text())
    pe = pair_evidence(Evidence(host="x", live=False), "GPU0", "GPU1", hmm=hmm)
    assert _names(infer_causes(HANG, pe)) == ["hmm"]
    assert _names(infer_causes(SLOW, pe)) == ["unknown"]
    assert infer_causes(OK, pe) == []  # the same box passed: HMM alone fails nothing


def test_small_bar1_is_named():
    # tinygrad/open-gpu-kernel-modules#13: 2x 4090 (24564 MiB) with BAR1 256 MiB, NCCL/P2P failed
    bar1 = [Bar1("GPU#0", 256, 24564), Bar1("GPU#1", 512, 24564)]
    causes = infer_causes(HANG, PairEvidence(label="PHB", bar1=bar1))
    assert _names(causes) == ["bar1"] and "256 MiB < FB 24564 MiB" in causes[0].evidence
    full = [g for g in parse_bar1(fixture_path("h200x2/nvidia-smi-q.txt").read_text())]
    assert _names(infer_causes(HANG, PairEvidence(label="PHB", bar1=full))) == ["unknown"]


def test_driver_without_p2p_is_named_from_topo_p2p():
    files = DoctorFiles(
        topo_file=str(PUBLIC / "topo/autodl_2x2080ti_pix_gpunumaid.txt"),
        p2p_file=[str(PUBLIC / "topo/autodl_2x2080ti_p2p_p_NS.txt")],
    )
    pe = pair_evidence(gather_files(files), "GPU0", "GPU1")
    causes = infer_causes(SLOW, pe)
    assert _names(causes)[0] == "driver_p2p" and "pcie=NS" in causes[0].evidence


def test_nvlink_pair_is_not_blamed_on_pcie_acs():
    text = (PUBLIC / "lspci/nccl629_grep_acsctl_tabs.txt").read_text()
    pe = pair_evidence(Evidence(host="x", live=False, pci=parse_acs(text)), "GPU0", "GPU1")
    pe.label = "NV18"
    assert _names(infer_causes(HANG, pe)) == ["unknown"]


def test_findings_name_the_pair_and_its_causes():
    pe = PairEvidence(label="PHB", bar1=[Bar1("GPU#0", 256, 24564)])
    result = judge_pair("GPU0", "GPU1", Run(HANG), None, 5)
    result.causes = infer_causes(result.outcome, pe)
    (f,) = findings([result])
    assert f.severity == "error" and f.subject == "GPU0-GPU1"
    assert "hang" in f.title and "bar1" in f.title and "Resizable BAR" in f.fix
