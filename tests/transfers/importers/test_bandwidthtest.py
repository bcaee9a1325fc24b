"""CUDA samples' bandwidthTest printouts as copy rows: the public captures, cut copies of
them, and `gpulane parse bandwidthtest` as a user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.errors import ParseError
from gpulane.transfers.importers.bandwidthtest import parse_bandwidthtest, stream_rows
from tests.conftest import fixture_path
from tests.parse_helpers import cut_copy, encoded_copy, json_rows, run_parse

BT = "public/bandwidthtest/"
ADA = BT + "stelline_asus_rtx6000ada_bandwidthTest_dev0.txt"


@pytest.mark.parametrize(
    ("name", "h2d", "d2h", "d2d", "model"),
    [
        ("autodl_2080ti_bandwidthTest.txt", 12.2, 13.2, 518.9, "NVIDIA GeForce RTX 2080 Ti"),
        ("stelline_asus_rtx6000ada_bandwidthTest_dev0.txt", 26.8, 26.3, 4366.8, None),
        ("routergao_A100_sxm4_bandwidthTest_tabs.txt", 12.3, 13.2, 1157.5, None),
        ("routergao_T4_bandwidthTest_no_indent_blanklines.txt", 9.7, 11.1, 239.6, "Tesla T4"),
    ],
)
def test_bandwidthtest(name: str, h2d: float, d2h: float, d2d: float, model: str | None) -> None:
    rows = list(stream_rows(str(fixture_path(BT + name)), run_id="run1", build=None))
    assert len(rows) == 3
    by_op = {r.op: r for r in rows}
    assert by_op["h2d"].algbw_gbps == h2d and by_op["h2d"].src == "host"
    assert by_op["h2d"].dst == "GPU0"
    assert by_op["d2h"].algbw_gbps == d2h and by_op["d2h"].dst == "host"
    assert by_op["d2d"].algbw_gbps == d2d and by_op["d2d"].memory == "device"
    for r in rows:
        assert (r.kind, r.backend, r.run_id, r.build) == (
            "copy",
            "bandwidthTest",
            "run1",
            name[:-4],
        )
        assert r.size_bytes == 32_000_000
        assert r.bidirectional is False and r.status == "ok"
        assert r.extra["result"] == "PASS"
    assert by_op["h2d"].memory == "pinned"
    assert by_op["h2d"].time_us == pytest.approx(32e6 / (h2d * 1e9) * 1e6)
    if model:
        assert by_op["h2d"].extra["gpu_model"] == model


SHMOO_FAIL = """[CUDA Bandwidth Test] - Starting...
Running on...

 Device 0: Tesla K80
 Shmoo Mode

 Host to Device Bandwidth, 1 Device(s)
 PAGEABLE Memory Transfers
   Transfer Size (Bytes)        Bandwidth(MB/s)
   1024                         300.5
   2048                         600.0

 Device to Host Bandwidth, 1 Device(s)
 PINNED Memory Transfers
 Write-Combined Memory Writes are Enabled
   Transfer Size (Bytes)        Bandwidth(MB/s)
   1024                         1000.0

Result = FAIL
"""


def test_pageable_shmoo_mb_and_fail() -> None:
    rows = parse_bandwidthtest(SHMOO_FAIL)
    assert [(r.op, r.memory, r.size_bytes) for r in rows] == [
        ("h2d", "pageable", 1024),
        ("h2d", "pageable", 2048),
        ("d2h", "pinned-wc", 1024),
    ]
    assert rows[0].algbw_gbps == pytest.approx(300.5 * 1048576 / 1e9)
    assert (rows[0].extra["printed"], rows[0].extra["unit"]) == ("300.5", "MB/s")
    assert all(r.status == "error" and "Result = FAIL" in (r.error or "") for r in rows)


def test_failed_test_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "k80.txt"
    path.write_text(SHMOO_FAIL)
    status, out, err = run_parse(capsys, "bandwidthtest", str(path), "--json")
    assert status == 1
    assert f"nothing measured in {path} (every run in it failed)" in err
    assert all(r["status"] == "error" for r in json_rows(out))


def test_file_cut_inside_a_number_keeps_no_stub(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`4366.8` cut to `436` is not a value: an error row at the cut, the rest kept."""
    path = cut_copy(tmp_path, ADA, "4366.8", 3)
    status, out, err = run_parse(capsys, "bandwidthtest", str(path), "--json")
    assert status == 0
    rows = json_rows(out)
    assert [r["algbw_gbps"] for r in rows if r["status"] == "ok"] == [26.8, 26.3]
    (cut,) = [r for r in rows if r["status"] == "error"]
    assert cut["algbw_gbps"] is None and cut["op"] == "d2d"
    assert cut["error"].startswith(f"{path}:20: the file ends inside a Device to Device")
    assert "'32000000                     436'" in cut["error"]
    assert all(r["algbw_gbps"] != 436.0 for r in rows)
    assert "# 1 of 3 rows are errors" in err


def test_file_cut_before_its_result_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Missing sections are reported: the file ends after the first table."""
    path = cut_copy(tmp_path, ADA, " Device to Host", 0)
    status, out, _ = run_parse(capsys, "bandwidthtest", str(path), "--json")
    rows = json_rows(out)
    assert status == 0
    assert [(r["op"], r["status"], r["algbw_gbps"]) for r in rows] == [
        ("h2d", "ok", 26.8),
        ("h2d", "error", None),
    ]
    assert (
        "without bandwidthTest's 'Result =' line: cut off (tables read: Host to Device)"
        in (rows[-1]["error"])
    )


def test_file_cut_in_its_first_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_copy(tmp_path, ADA, "26.8", 2)
    status, out, err = run_parse(capsys, "bandwidthtest", str(path))
    assert status == 1
    assert "nothing measured" in err and "error:" in out and ":10:" in out


def test_utf16_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for encoding in ("utf-16", "utf-16-le"):  # with and without a byte-order mark
        path = encoded_copy(tmp_path, fixture_path(ADA), encoding, f"bt-{encoding}.txt", "\r\n")
        status, out, _ = run_parse(capsys, "bandwidthtest", str(path), "--json")
        assert status == 0
        assert [r["algbw_gbps"] for r in json_rows(out)] == [26.8, 26.3, 4366.8]


def test_printed_as_the_tool_prints(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_parse(capsys, "bandwidthtest", str(fixture_path(ADA)))
    assert status == 0
    lines = [line.rstrip() for line in out.splitlines()]
    at = lines.index(" Device to Device Bandwidth, 1 Device(s)")
    assert lines[at + 1 : at + 4] == [
        " PINNED Memory Transfers",
        "   Transfer Size (Bytes)        Bandwidth(GB/s)",
        "   32000000                     4366.8",
    ]
    assert lines[-1] == "Result = PASS"


def test_two_runs_pasted_one_after_another() -> None:
    text = fixture_path(ADA).read_text()
    rows = parse_bandwidthtest(text + text.replace("26.8", "27.1"))
    assert [r.algbw_gbps for r in rows if r.op == "h2d"] == [26.8, 27.1]
    assert all(r.status == "ok" for r in rows)


def test_other_files_are_parse_errors() -> None:
    with pytest.raises(ParseError, match="no bandwidthTest transfer table"):
        parse_bandwidthtest("nothing here\n", "f.txt")
    with pytest.raises(ParseError):
        parse_bandwidthtest(
            fixture_path(BT + "llmaction_8xH800_nvbandwidth_v0.2_d2d_read_ce.txt").read_text()
        )
