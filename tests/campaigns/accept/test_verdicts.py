"""`gpulane accept` verdicts end to end (the command, in-process): INCOMPLETE on rows that
cannot show the required checks (an nccl-tests log), --allow-skip, JUnit, named baselines
that must exist, save_baseline under results_dir, the user's own rules file, --rules."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from gpulane.commands.accept import main
from gpulane.record import Row
from tests.analysis.fixture_rows import nccl_rows, write_run
from tests.analysis.rules.synthetic import collectives, machine, topology


def accept(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["format=none", "html=false", "doctor=false", *args])
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.fixture
def nccl_tests_log(tmp_path: Path) -> Path:
    """`gpulane parse nccl-tests` of the 2x H200 log: collectives only, no topology."""
    return write_run(
        tmp_path / "runs" / "nt",
        nccl_rows("h200x2/nccl-tests-all_reduce.txt", build="h200", run_id="nt"),
    )


def four_gpu_group(root: Path, rows: list[Row] | None = None) -> Path:
    group = root / "runs" / "group"
    write_run(group / "rows", rows if rows is not None else machine(4))
    (group / "topology.json").write_text(json.dumps(topology(4)))
    return group


NO_INFO = ("--allow-skip", "nccl_transport_matches_path")


def test_an_nccl_tests_log_is_incomplete_not_pass(
    nccl_tests_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = accept(capsys, f"run={nccl_tests_log}")
    assert status == 3
    assert out.startswith("accept: INCOMPLETE: 2 passed, 0 failed")
    assert "required but not run: pcie_max_link, p2p_ok, nccl_transport_matches_path" in out
    assert "# missing: pinned_h2d: no rows match; supply it with: gpulane copy" in out
    assert "# missing: pcie_max_link: no topology" in out and "gpulane topo --json" in out
    result = json.loads((nccl_tests_log / "accept.json").read_text())
    assert result["verdict"] == "INCOMPLETE" and result["passed"] is False
    assert result["machine"]["gpu"] is True
    suite = ET.parse(nccl_tests_log / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    errors = [c for c in suite.iter("testcase") if c.find("error") is not None]
    assert int(suite.get("errors", "0")) == len(errors) == len(result["missing"])
    # the log's rows name their path (NV18): the NVLink checks it lacks are required too
    assert {m["rule"] for m in result["missing"]} == {
        "pcie_max_link", "p2p_ok", "nccl_transport_matches_path", "all_gather_busbw_nvlink",
        "all_reduce_busbw_nvlink",  # NV18 without a per-link rate (no topology)
        "p2p_copy_nvlink", "pinned_h2d", "pinned_d2h", "pinned_h2d_all_gpus",
        "pinned_d2h_all_gpus",
    }, result["missing"]  # fmt: skip
    # every check that did not run is <skipped/>, none a bare (passed) testcase
    for case in suite.iter("testcase"):
        rule = (case.get("classname") or "").rsplit(".", 1)[-1]
        line = [c for c in result["checks"] if c["rule"] == rule]
        if line and all(c["status"] == "skip" for c in line):
            assert case.find("skipped") is not None or case.find("error") is not None


def test_allow_skip_accepts_a_missing_check_knowingly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [r for r in machine(4) if r.op != "p2p"]
    group = four_gpu_group(tmp_path, rows)
    status, out, _ = accept(capsys, f"run={group}", *NO_INFO)
    assert status == 3 and "required but not run: p2p_copy_nvlink" in out
    status, out, _ = accept(capsys, f"run={group}", *NO_INFO, "--allow-skip=p2p_copy_nvlink")
    assert status == 0, out
    assert "accept: PASS" in out
    assert "allowed to skip: nccl_transport_matches_path, p2p_copy_nvlink" in out
    # the second accept of the group: beside the first's verdict, never over it
    result = json.loads((group / "accept-2" / "accept.json").read_text())
    assert [a["rule"] for a in result["allowed_skips"]] == [
        "nccl_transport_matches_path",
        "p2p_copy_nvlink",
    ]
    status, _, err = accept(capsys, f"run={group}", "--allow-skip", "p2p_copy")
    assert status == 2 and err.startswith("gpulane: error: allow_skip: 'p2p_copy' is not a rule")


def test_the_4_gpu_machine_passes_and_a_short_gpu_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    group = four_gpu_group(tmp_path)
    status, out, _ = accept(capsys, f"run={group}", *NO_INFO)
    assert status == 0 and out.startswith("accept: PASS"), out
    from tests.analysis.rules.synthetic import host_copies, peer_copies

    short = host_copies(4, gpu_solo={"GPU3": 40.0}) + collectives(4) + peer_copies(4)
    group = four_gpu_group(tmp_path / "short", short)
    status, out, _ = accept(capsys, f"run={group}", *NO_INFO)
    assert status == 1 and "failed rules: pinned_d2h, pinned_h2d;" in out
    result = json.loads((group / "accept.json").read_text())
    assert {c["subject"] for c in result["checks"] if c["status"] == "fail"} == {"GPU3"}


def test_baselines_are_named_not_guessed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = four_gpu_group(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the current directory plays no part
    status, _, err = accept(capsys, f"run={group}", *NO_INFO, "--baseline", "nosuch")
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("gpulane: error: baseline: 'nosuch'")
    assert "stored: none yet; store one with save_baseline=NAME" in err
    assert not (elsewhere / "runs").exists() and not (tmp_path / "runs" / "baselines").exists()

    # save_baseline stores it beside the run (results_dir left at its default) ...
    status, out, _ = accept(capsys, f"run={group}", *NO_INFO, "save_baseline=golden")
    stored = tmp_path / "runs" / "baselines" / "golden"
    assert status == 0 and f"# baseline stored: {stored}" in out
    assert (stored / "rows.parquet").exists() and (stored / "topology.json").exists()
    # ... where --baseline finds it; a typo now lists what there is
    status, out, _ = accept(capsys, f"run={group}", *NO_INFO, "--baseline", "golden")
    assert status == 0 and "no baseline given" not in out
    status, _, err = accept(capsys, f"run={group}", *NO_INFO, "--baseline", "gloden")
    assert status == 2 and "(stored: golden)" in err
    # an explicit results_dir is where baselines live
    runs = tmp_path / "other-runs"
    status, out, _ = accept(
        capsys, f"run={group}", *NO_INFO, f"results_dir={runs}", "--save-baseline", "b2"
    )
    assert status == 0 and (runs / "baselines" / "b2" / "baseline.json").exists()


def test_a_run_that_did_not_pass_is_not_stored_as_a_baseline(
    nccl_tests_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = accept(capsys, f"run={nccl_tests_log}", "save_baseline=golden")
    assert status == 3
    assert "# baseline 'golden' not stored: the verdict is INCOMPLETE" in out
    assert not (nccl_tests_log.parent / "baselines" / "golden").exists()


def test_own_rules_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    group = four_gpu_group(tmp_path)
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        yaml.safe_dump(
            {
                "checks": {
                    "h2d_fast": {
                        "check": "min",
                        "description": "pinned H2D at least 54 GB/s",
                        "select": {"kind": "copy", "op": "h2d", "memory": "pinned", "size": "max"},
                        "metric": "algbw_gbps",
                        "min": 54,
                        "required": ["gpu"],
                    }
                }
            }
        )
    )
    status, out, _ = accept(capsys, f"run={group}", f"rules={mine}")
    assert status == 0 and out.startswith("accept: PASS: 4 passed")
    on_top = tmp_path / "on-top.yaml"
    on_top.write_text("defaults: [default]\nchecks:\n  pinned_h2d: {enabled: false}\n")
    status, out, _ = accept(capsys, f"run={group}", f"--rules={on_top}", *NO_INFO)
    assert status == 0 and "pinned_h2d " not in out
    for text, words in (
        ("checks: [a, b]\n", "expected `checks:`"),
        ("checks:\n  x: {check: fastest}\n", "rules.checks.x.check: 'fastest' is not one of"),
        (
            "checks:\n  x: {check: min, metric: algbw_gbps, required: [gpus]}\n",
            "'gpus' is not a machine fact",
        ),
        ("checks: {x: [\n", "not YAML"),
        ("rules: {}\n", "unknown key(s) rules"),
    ):
        mine.write_text(text)
        status, _, err = accept(capsys, f"run={group}", f"rules={mine}")
        assert status == 2 and err.count("\n") == 1, err
        assert err.startswith(f"gpulane: error: rules: {mine}: ") and words in err, err
    status, _, err = accept(capsys, f"run={group}", f"rules={tmp_path / 'none.yaml'}")
    assert status == 2 and "no such file" in err


def test_rules_are_listed_and_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--rules"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["checks"]["pinned_h2d_all_gpus"]["select"]["mode"] == "aggregate"
    assert main(["--rules", "rules=pcie"]) == 0
    assert "all_reduce_busbw_nvlink" not in capsys.readouterr().out
    main(["--help"])
    out = capsys.readouterr().out
    assert "3 INCOMPLETE" in out
    for rule in printed["checks"]:
        assert f"\n  {rule} " in out


def test_the_report_says_incomplete_and_what_is_missing(
    nccl_tests_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpulane.analysis.report.accept_json import read_accept
    from gpulane.analysis.report.checks import verdict_head

    status, _, _ = accept(capsys, f"run={nccl_tests_log}", "--allow-skip", "p2p_ok")
    assert status == 3
    back = read_accept(nccl_tests_log / "accept.json")
    assert back.verdict.status == "INCOMPLETE"
    head = verdict_head(back.verdict, "default")
    assert '<span class="badge incomplete">INCOMPLETE</span>' in head
    assert "required, did not run: <b>pinned_h2d</b>" in head and "supply it with" in head
    assert "allowed to skip (--allow-skip): <b>p2p_ok</b>" in head
