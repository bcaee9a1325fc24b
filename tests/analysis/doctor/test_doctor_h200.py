"""gpulane doctor offline on what benchmarks/doctor/run_gpu.sh captured on the 2xH200
machine (NV18, NCCL 2.28.9, a VM with the GPUs passed through): its captures and the
three presets' runs give the findings the live doctor gave there (live/doctor.json), but
for the socket run's transport, which the live doctor mis-read as two GPUs "between nodes".
The captures cut anywhere or in a wrong encoding give findings or one error line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.analysis.rules import FAIL, PASS, evaluate
from gpulane.analysis.store import frame_from_rows
from gpulane.cli import main as cli
from gpulane.record import read_rows
from gpulane.topology.nccl_logs import read_nccl_files, summary
from tests.analysis.fixture_rows import h200_topology
from tests.analysis.rules.rule_sets import rule_set
from tests.conftest import fixture_path

HERE = fixture_path("h200x2/doctor")
CAPTURES = HERE / "captures"
RUNS = HERE / "runs"
LIVE = json.loads((HERE / "live" / "doctor.json").read_text())
FILES = {
    "--lspci-file": "lspci-vvv.txt",  # "lspci: command not found": lspci was not installed
    "--smi-q-file": "nvidia-smi-q.txt",
    "--nvlink-e-file": "nvidia-smi-nvlink-e.txt",
    "--topo-file": "topo-m.txt",
    "--cmdline-file": "cmdline.txt",
    "--iommu-file": "iommu.txt",  # grep/ls: no /sys/kernel/iommu_groups
    "--modules-file": "modules.txt",
}
SOCKET_PAIR = (
    "error",
    "transport",
    "socket/GPU0-GPU1: NCCL did not use the path's transport",
)


def _args(files: dict[str, Path] | None = None) -> list[str]:
    given = {opt: CAPTURES / name for opt, name in FILES.items()} | (files or {})
    return [x for opt, path in given.items() for x in (opt, str(path))]


def _doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    status = cli(["doctor", "--json", *argv])
    return status, json.loads(capsys.readouterr().out)


def _triples(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["severity"], f["check"], f["title"]) for f in report["findings"]]


def _run(preset: str) -> Path:
    (run,) = RUNS.glob(f"*-{preset}-*")
    return run


def test_the_captures_give_the_live_doctors_findings(capsys):
    status, report = _doctor(capsys, *_args(), "--run", str(RUNS))
    # The live doctor (before issue 28) called the presets' own NCCL_P2P_DISABLE=1 and
    # NCCL_SHM_DISABLE=1 errors and the transports they gave failures (exit 1); the runs
    # asked for them (preset=pcie-host, preset=socket in their config.yaml): now notes.
    assert status == 0 and report["live"] is False
    live = _triples(LIVE)
    # The live doctor (before the fix) called the socket run's GPU0 and GPU1 two nodes
    # talking over sockets, "likely cause: NCCL found no InfiniBand/RoCE device"; it is
    # one NV18 pair of one host that NCCL_P2P_DISABLE and NCCL_SHM_DISABLE pushed there.
    socket_gpus = [t for t in live if t[2].startswith("socket/vm:GPU")]
    assert len(socket_gpus) == 2
    pcie = "pcie-host/GPU0-GPU1: NCCL did not use the path's transport"
    assert ("error", "transport", pcie) in live
    assert ("error", "nccl_env", "NCCL_P2P_DISABLE=1 switches a path off") in live
    assert ("warning", "nccl_env", "NCCL_SHM_DISABLE=1 switches a path off") in live
    run = {p: _run(p).name for p in ("pcie-host", "socket")}
    asked = "NCCL used another transport, as the run asked"
    assert _triples(report) == [
        ("warning", "pcie_replays", "GPU1: 1 PCIe replays since reset"),
        ("info", "iommu", "GPUs passed through to a VM: the host's IOMMU and ACS are not visible here"),
        ("info", "transport", f"pcie-host/GPU0-GPU1: {asked}"),
        ("info", "transport", f"socket/GPU0-GPU1: {asked}"),
        ("info", "nccl_env", "NCCL_NVLS_ENABLE=0 switches a path off"),
        ("info", "nccl_env",
         f"NCCL_P2P_DISABLE=1 was the run's choice (run {run['pcie-host']}'s preset=pcie-host)"),
        ("info", "nccl_env",
         f"NCCL_SHM_DISABLE=1 was the run's choice (run {run['socket']}'s preset=socket)"),
    ]  # fmt: skip
    SOCKET = ("info", "transport", f"socket/GPU0-GPU1: {asked}")
    by_title = {f["title"]: f for f in report["findings"]}
    assert by_title[SOCKET[2]]["evidence"] == (
        "NV18: NCCL used NET/Socket, not P2P over NVLink; likely cause: NCCL_P2P_DISABLE=1 "
        "and NCCL_SHM_DISABLE=1 in the run's environment; the run asked for "
        f"NCCL_P2P_DISABLE=1 (run {run['socket']}'s preset=socket), "
        f"NCCL_SHM_DISABLE=1 (run {run['socket']}'s preset=socket)"
    )
    # Every other finding says what the live one said, word for word (the NVLS note's
    # evidence names where the variable was seen: the live shell's environment there).
    for f in LIVE["findings"]:
        if f["title"] in by_title and f["check"] != "nccl_env":
            assert by_title[f["title"]] == f
    assert by_title["GPU1: 1 PCIe replays since reset"]["evidence"] == (
        "GPU1 (0000:00:07.0): Replays Since Reset: 1"
    )
    # Live it could also read topo -p2p (through NVML) and dmesg; the captures hold neither.
    assert set(LIVE["checks_run"]) - set(report["checks_run"]) == {"p2p", "xid"}
    assert report["checks_run"]["transport"] == "2 finding(s)"
    assert report["checks_not_run"]["acs"] == (
        f"lspci: {CAPTURES / 'lspci-vvv.txt'}: not lspci -vvv output (line 1: "
        "'benchmarks/doctor/run_gpu.sh: line 96: lspci: command not found')"
    )
    # The shell's error in place of lspci costs neither the topology nor the NUMA check.
    assert report["sources"]["topology"] == str(CAPTURES / "topo-m.txt")
    assert report["checks_run"]["numa"] == report["checks_run"]["pcie_link"] == "ok"
    assert report["absent"]["iommu"].endswith("no IOMMU group (no IOMMU enabled, or exposed)")
    assert report["sources"]["rows"] == f"{RUNS} (15 rows)"


def test_the_nvlink_run_alone_has_no_transport_error(capsys):
    status, report = _doctor(capsys, *_args(), "--run", str(_run("nvlink")))
    assert report["checks_run"]["transport"] == "ok"
    assert _triples(report) == [
        ("warning", "pcie_replays", "GPU1: 1 PCIe replays since reset"),
        ("info", "iommu", "GPUs passed through to a VM: the host's IOMMU and ACS are not visible here"),
        ("info", "nccl_env", "NCCL_NVLS_ENABLE=0 switches a path off"),
    ]  # fmt: skip
    assert status == 0


def test_the_text_report_names_where_its_evidence_came_from_once(capsys):
    assert cli(["doctor", *_args(), "--run", str(_run("nvlink"))]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "# gpulane doctor: (captured files): 0 error(s), 1 warning(s), 2 note(s)"


def test_the_rule_on_the_rows_as_recorded_and_as_read_again():
    """The socket run's rows were written before nccl_logs knew one-host sockets: their
    extra.nccl lists GPU0 and GPU1 under `net`. The rule pairs them (the rows' hosts say one
    host); NCCL's files read again give the pair itself. Both: one FAIL on GPU0-GPU1."""
    rows = list(read_rows(_run("socket") / "rows.jsonl"))
    recorded = rows[-1].extra["nccl"]
    assert recorded["pairs"] == [] and [n["gpu"] for n in recorded["net"]] == ["GPU0", "GPU1"]
    again = summary(read_nccl_files(sorted((_run("socket") / "nccl").glob("*.log"))))
    for nccl in (recorded, again):
        for r in rows:
            r.extra["nccl"] = nccl
        v = evaluate(frame_from_rows(rows), rule_set(), h200_topology())
        (c,) = [c for c in v.checks if c.rule == "nccl_transport_matches_path"]
        assert (c.status, c.subject) == (FAIL, "GPU0-GPU1")
        assert c.message.endswith(
            "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 in the run's environment"
        )
    # P2P off alone: host memory (SHM) on the NV18 pair, the one variable named
    pcie_host = list(read_rows(_run("pcie-host") / "rows.jsonl"))
    v = evaluate(frame_from_rows(pcie_host), rule_set(), h200_topology())
    (c,) = [c for c in v.checks if c.rule == "nccl_transport_matches_path"]
    assert (c.status, c.subject) == (FAIL, "GPU0-GPU1")
    assert c.message == (
        "NV18: NCCL used SHM, not P2P over NVLink; likely cause: NCCL_P2P_DISABLE=1 in the "
        "run's environment"
    )
    nvlink = list(read_rows(_run("nvlink") / "rows.jsonl"))
    v = evaluate(frame_from_rows(nvlink), rule_set(), h200_topology())
    (c,) = [c for c in v.checks if c.rule == "nccl_transport_matches_path"]
    assert (c.status, c.message) == (PASS, "NV18: NCCL used P2P/CUMEM")


def _encode(text: str, how: str) -> bytes:
    if how == "utf-16":
        return text.encode("utf-16")
    if how == "latin-1":  # one byte per character: what a UTF-8 reader sees as damaged
        return text.encode("latin-1", errors="replace")
    return text.encode("utf-8")


CUT_FILES = [*sorted(FILES), "--run rows.jsonl", "--run nccl"]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    option=st.sampled_from(CUT_FILES),
    fraction=st.floats(0.0, 1.0),
    how=st.sampled_from(["utf-8", "utf-16", "latin-1"]),
    salt=st.sampled_from(["", "\u00b5s \u2013 \u00e9", "\x00"]),
)
def test_cut_and_wrongly_encoded_captures_never_raise(
    tmp_path_factory, capsys, option, fraction, how, salt
):
    tmp = tmp_path_factory.mktemp("cut")
    files: dict[str, Path] = {}
    if option.startswith("--run"):
        target = tmp / "runs" / _run("socket").name
        shutil.copytree(RUNS, tmp / "runs")
        rank0 = sorted((target / "nccl").glob("*.log"))[0]
        source = rank0 if option == "--run nccl" else target / "rows.jsonl"
    else:
        source = tmp / FILES[option]
        shutil.copy(CAPTURES / FILES[option], source)
        files[option] = source
    text = source.read_text()
    cut = text[: int(len(text) * fraction)]
    # A non-ASCII salt in the middle: Latin-1 bytes of it are not UTF-8.
    source.write_bytes(_encode(cut[: len(cut) // 2] + salt + cut[len(cut) // 2 :], how))
    run = str(tmp / "runs") if option.startswith("--run") else str(RUNS)
    status = cli(["doctor", "--json", *_args(files), "--run", run])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if status == 2:
        (line,) = err.strip().splitlines()
        assert line.startswith("gpulane: error: ") and out == ""
    else:
        report = json.loads(out)
        assert status == (1 if report["counts"]["error"] else 0)
        assert all(f["severity"] in ("error", "warning", "info") for f in report["findings"])
