"""gpulane doctor from files: the H200 machine's captures (healthy), public ACS, Xid and
NCCL captures (findings), a run directory (NCCL's transport, bandwidth against the line
rate, where the ranks ran); the command's text, JSON and exit status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpulane.analysis.doctor import CHECKS, run_doctor
from gpulane.cli import main as cli
from gpulane.commands.doctor import FILE_OPTIONS
from gpulane.preflight import PREFLIGHT_FILE
from gpulane.record import RowWriter
from gpulane.topology.evidence import DoctorFiles, add_run, gather_files
from gpulane.topology.nccl_info import parse_nccl_info
from gpulane.topology.nccl_logs import summary
from tests.analysis.fixture_rows import nccl_rows
from tests.conftest import fixture_path

PUBLIC = Path(__file__).resolve().parents[2] / "fixtures" / "public"
H200 = {
    "smi_q_file": str(fixture_path("h200x2/nvidia-smi-q.txt")),
    "topo_file": str(fixture_path("h200x2/topo-m.txt")),
    # every mode nvidia-smi reports: PCIe P2P is "NS" on this NVLink pair, as it should be
    "p2p_file": [str(fixture_path(f"h200x2/topo-p2p-{mode}.txt")) for mode in "rwnap"],
}
H200_ARGS = ["--smi-q-file", H200["smi_q_file"], "--topo-file", H200["topo_file"]]
H200_ARGS += [x for f in H200["p2p_file"] for x in ("--p2p-file", f)]


def test_the_healthy_h200_machine_has_no_finding():
    report = run_doctor(gather_files(DoctorFiles(**H200)))  # type: ignore[arg-type]
    assert report.findings == [] and report.exit_status() == 0
    assert {"p2p", "pcie_link", "persistence", "clocks", "ecc", "pcie_replays"} <= set(report.ran)
    # What the files cannot say is named, with why.
    assert report.not_run["acs"] == "lspci: not given (--lspci-file)"
    assert "no NIC in the topology" in report.not_run["nic_numa"]


def test_p2p_off_in_a_mode_that_carries_the_pair_is_an_error(tmp_path):
    """NV18 with NVLink P2P not supported: NCCL cannot use the links."""
    broken = tmp_path / "topo-p2p-n.txt"
    broken.write_text(fixture_path("h200x2/topo-p2p-n.txt").read_text().replace("OK", "NS"))
    files = DoctorFiles(**{**H200, "p2p_file": [*H200["p2p_file"][:2], str(broken)]})  # type: ignore[arg-type]
    (finding,) = run_doctor(gather_files(files)).findings
    assert finding.check == "p2p" and finding.severity == "error"
    assert "nvlink=NS" in finding.evidence and "pcie" not in finding.evidence


def test_acs_from_a_grep_of_acsctl():
    ev = gather_files(
        DoctorFiles(lspci_file=str(PUBLIC / "lspci" / "nccl629_grep_acsctl_tabs.txt"))
    )
    (f,) = run_doctor(ev).findings
    assert (f.severity, f.check) == ("warning", "acs")
    assert f.title == "ACS redirects peer traffic on 4 of 15 ports"
    assert f.evidence.startswith("line 4: ACSCtl:\tSrcValid+ TransBlk- ReqRedir+")
    assert "setpci" in f.fix and "root complex" in f.why


def test_xid_79_is_an_error_and_the_command_exits_1(capsys):
    dmesg = str(PUBLIC / "kernel" / "xid_lines_nvsentinel155_and_nvidia_xid_docs.txt")
    assert cli(["doctor", *H200_ARGS, "--dmesg-file", dmesg]) == 1
    out = capsys.readouterr().out
    assert "1. [ERROR] Xid 79 on 0000:44:00: GPU has fallen off the bus  (xid)" in out
    assert "evidence:  NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus" in out
    assert "[INFO] Xid 14 on 0000:03:00" in out  # an application's own fault: a note
    assert "# not checked:" in out and "acs: lspci: not given (--lspci-file)" in out


def test_json_and_bad_input(capsys, tmp_path):
    env = tmp_path / "env.txt"
    env.write_text("export NCCL_P2P_DISABLE=1\nNCCL_NVLS_ENABLE=0\nPATH=/usr/bin\n")
    assert cli(["doctor", *H200_ARGS, "--env-file", str(env), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["counts"] == {"error": 1, "warning": 0, "info": 1}
    first = report["findings"][0]
    assert set(first) == {"severity", "check", "title", "evidence", "why", "fix", "subject"}
    assert first["evidence"] == f"NCCL_P2P_DISABLE=1 ({env})"
    assert report["absent"]["lspci"] == "not given (--lspci-file)"
    # Bad input: one line, exit 2.
    assert cli(["doctor", "--lspci-file", str(tmp_path / "none")]) == 2
    assert "gpulane: error: --lspci-file" in capsys.readouterr().err
    assert cli(["doctor", "--no-load", "--lspci-file", str(env)]) == 2


def _run_dir(tmp_path: Path, rows: list[Any], facts: list[dict[str, Any]] | None = None) -> Path:
    run = tmp_path / "run"
    with RowWriter(run) as w:
        for r in rows:
            w.write(r)
    if facts is not None:
        (run / PREFLIGHT_FILE).write_text(json.dumps(facts))
    return run


def test_a_run_that_moved_nvlink_traffic_through_host_memory(tmp_path):
    shm = summary(
        parse_nccl_info(
            (PUBLIC / "nccl-info" / "nccl1609_h800_shm_direct_oldfmt_EXCERPT.txt").read_text()
        )
    )
    env = {"NCCL_P2P_DISABLE": "1"}
    rows = nccl_rows(
        "h200x2/nccl-tests-all_reduce-p2p-disabled.txt", build="pcie-host", run_id="r2", env=env
    )
    for r in rows:
        r.transport, r.extra["nccl"] = shm["transport"], shm
    ev = gather_files(DoctorFiles(**H200))  # type: ignore[arg-type]
    add_run(ev, str(_run_dir(tmp_path, rows)))
    report = run_doctor(ev)
    by_check = {f.check: f for f in report.findings}
    assert by_check["transport"].severity == "error"
    assert by_check["transport"].evidence.endswith(
        "likely cause: NCCL_P2P_DISABLE=1 in the run's environment"
    )
    assert by_check["nccl_env"].evidence == "NCCL_P2P_DISABLE=1 (run r2's env)"
    bw = by_check["bandwidth"]
    assert bw.title == "all_reduce reached 6% of the path's rate"
    assert bw.evidence.startswith("all_reduce 4096 MiB: busbw 27.8 GB/s against 478.1 GB/s (NV18")
    assert "NCCL used SHM" in bw.evidence
    # Errors first.
    assert [f.severity for f in report.findings] == sorted(
        (f.severity for f in report.findings), key=("error", "warning", "info").index
    )


def test_ranks_far_from_their_gpu(tmp_path):
    facts = [
        {"rank": 0, "host": "vm", "device": "cuda:0", "cpus": "0-31"},
        {"rank": 1, "host": "vm", "device": "cuda:1", "cpus": "32-63"},
    ]
    ev = gather_files(DoctorFiles(**H200))  # type: ignore[arg-type]
    add_run(ev, str(_run_dir(tmp_path, [], facts)))
    (f,) = [f for f in run_doctor(ev).findings if f.check == "numa"]
    assert f.title == "rank 1 ran on CPUs far from GPU1"
    assert f.evidence == "rank 1 on vm: CPUs 32-63; GPU1 is local to CPUs 0-31 (NUMA node 0)"


def test_every_check_is_documented_and_every_file_option_exists():
    doc = (Path(__file__).resolve().parents[3] / "docs" / "doctor.md").read_text()
    for name, check in CHECKS.items():
        assert f"`{name}`" in doc, name
        assert check.needs and check.about
    for option in FILE_OPTIONS:
        assert option in doc, option


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_checks_say_why_they_did_not_run_on_empty_evidence(name: str):
    report = run_doctor(gather_files(DoctorFiles()), only=[name])
    assert report.not_run.get(name)


@pytest.mark.parametrize(
    ("lspci", "left_out"),
    [
        ("nccl629_grep_acsctl_tabs.txt", None),  # no device line: ACS only
        ("stelline_puget_wrx90_lspci_tv.txt", None),  # a tree: the topology's PCIe tree
        ("openvmm3461_root_port_acs_disabled_ELIDED.txt", ":12: unexpected unindented line"),
    ],
)
def test_an_lspci_capture_the_topology_cannot_use_costs_it_nothing(lspci: str, left_out: Any):
    """topo -m and nvidia-smi -q still give the topology (its P2P, links and NUMA checks)
    whatever the lspci file holds; a listing the topology's parser refuses is named."""
    ev = gather_files(DoctorFiles(**H200, lspci_file=str(PUBLIC / "lspci" / lspci)))  # type: ignore[arg-type]
    assert ev.topology is not None and [g.name for g in ev.topology.gpus] == ["GPU0", "GPU1"]
    assert ev.sources["lspci"].endswith(lspci)
    where = ev.sources["topology"]
    assert ("(lspci left out: " in where) == (left_out is not None)
    assert left_out is None or left_out in where
    report = run_doctor(ev)
    assert {"p2p", "pcie_link"} <= set(report.ran)
