"""`gpulane parse`: one front for every importer, one --out layout, exit statuses, help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpulane.parquet_rows import read_parquet
from gpulane.record import read_rows
from tests.conftest import fixture_path
from tests.parse_helpers import json_rows, run_parse

BT = "public/bandwidthtest/"
FILES = {
    "bandwidthtest": BT + "stelline_asus_rtx6000ada_bandwidthTest_dev0.txt",
    "p2p": BT + "autodl_2x2080ti_p2pBandwidthLatencyTest_noP2P.txt",
    "nvbandwidth": BT + "llmaction_8xH800_nvbandwidth_v0.2_d2d_read_ce.txt",
    "vllm": "public/vllm/wangjunjian_tp8_qwen72b_benchmark_serving_sharegpt.txt",
}


def test_help_lists_formats_and_their_options(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_parse(capsys, "--help")
    assert status == 0
    for name in ("nccl-tests", "bandwidthtest", "p2p", "nvbandwidth", "vllm"):
        assert f"\n  {name} " in out
    assert "--tp X: tensor-parallel size" in out and "--output-len X" in out
    status, out, _ = run_parse(capsys, "vllm", "--help")
    assert status == 0 and "--input-len" in out and "--run-id" in out


def test_unknown_format(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run_parse(capsys, "iperf", "x.txt")
    assert status == 2
    assert err == "gpulane: error: parse: unknown format 'iperf'; formats: nccl-tests, " \
        "bandwidthtest, p2p, nvbandwidth, vllm, sglang\n"  # fmt: skip


@pytest.mark.parametrize("name", sorted(FILES))
def test_one_out_layout_for_every_format(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "runs" / name
    status, out, err = run_parse(
        capsys, name, str(fixture_path(FILES[name])), "--out", str(out_dir), "--json",
        "--build", "b1", "--run-id", "r1",
    )  # fmt: skip
    assert status == 0, err
    printed = json_rows(out)
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "facts.jsonl",
        "rows.jsonl",
        "rows.parquet",
    ]
    stored = list(read_rows(out_dir / "rows.jsonl"))
    assert [r.to_dict() for r in stored] == printed
    assert {(r.build, r.run_id) for r in stored} == {("b1", "r1")}
    assert len(read_parquet(out_dir / "rows.parquet")) == len(stored)
    assert f"# {len(stored)} rows: {out_dir / 'rows.jsonl'} and rows.parquet" in err


def test_out_holding_rows_is_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rows.jsonl").write_text("{}\n")
    status, out, err = run_parse(
        capsys, "p2p", str(tmp_path / "no-such-file.txt"), "--out", str(tmp_path)
    )
    assert status == 2 and out == ""
    assert err == (
        f"gpulane: error: --out {tmp_path}: already holds rows.jsonl; give a new directory "
        "(rows of different parses are not mixed)\n"
    )
    assert (tmp_path / "rows.jsonl").read_text() == "{}\n"


def test_unwritable_out_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    status, _, err = run_parse(
        capsys, "vllm", str(fixture_path(FILES["vllm"])), "--out", str(blocker / "run")
    )
    assert status == 2
    assert err.startswith(f"gpulane: error: --out {blocker / 'run'}: cannot write there: ")
    assert len(err.splitlines()) == 1


def test_wrong_kind_exits_2_and_leaves_no_empty_run_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "run"
    status, _, err = run_parse(
        capsys, "p2p", str(fixture_path(FILES["bandwidthtest"])), "--out", str(out_dir)
    )
    assert status == 2
    path = fixture_path(FILES["bandwidthtest"])
    assert err == (
        f"gpulane: error: {path}: not p2p output (no p2pBandwidthLatencyTest matrix found); "
        f"this file looks like bandwidthtest output: `gpulane parse bandwidthtest {path}`\n"
    )
    assert not out_dir.exists()


def test_unreadable_file(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run_parse(capsys, "nvbandwidth", "/no/such/file.txt")
    assert status == 2
    assert err == "gpulane: error: /no/such/file.txt: cannot read: No such file or directory\n"


def test_bad_format_option(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run_parse(capsys, "vllm", str(fixture_path(FILES["vllm"])), "--tp", "eight")
    assert status == 2
    assert err == "gpulane: error: --tp: expected a whole number, got 'eight'\n"


def test_several_files_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(fixture_path(BT + n)) for n in (
        "autodl_2080ti_bandwidthTest.txt", "routergao_A100_sxm4_bandwidthTest_tabs.txt",
    )]  # fmt: skip
    status, out, _ = run_parse(capsys, "bandwidthtest", *files, "--json")
    rows = json_rows(out)
    assert status == 0 and len(rows) == 6 and len({r["run_id"] for r in rows}) == 1
    assert [r["build"] for r in rows] == ["autodl_2080ti_bandwidthTest"] * 3 + [
        "routergao_A100_sxm4_bandwidthTest_tabs"
    ] * 3


def test_nccl_tests_entry_still_dispatches(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_parse(
        capsys, "nccl-tests", str(fixture_path("h200x2/nccl-tests-all_reduce.txt")), "--json"
    )
    assert status == 0 and json.loads(out.splitlines()[0])["backend"] == "nccl-tests"


def test_json_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`gpulane parse ... --json | head -1`: no BrokenPipeError, and --out still gets every row."""
    f = fixture_path("public/bandwidthtest/llmaction_8xH800_nvbandwidth_v0.2_all_tests.txt")
    script = (
        f"{sys.executable} -m gpulane parse nvbandwidth {f} --json --out {tmp_path / 'run'} "
        "| head -1; echo status=${PIPESTATUS[0]}"
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    first, status = done.stdout.splitlines()
    assert json.loads(first)["extra"]["test"] == "host_to_device_memcpy_ce"
    assert status == "status=0"
    assert "Traceback" not in done.stderr and "Error" not in done.stderr
    assert len(list(read_rows(tmp_path / "run" / "rows.jsonl"))) == 624
