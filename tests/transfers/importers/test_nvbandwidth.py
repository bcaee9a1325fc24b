"""nvbandwidth printouts as copy rows: every testcase named on its rows and in the
printout, matrices printed as the tool prints them, cut copies reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.errors import ParseError
from gpulane.record import Row
from gpulane.transfers.importers.nvbandwidth import parse_nvbandwidth
from tests.conftest import fixture_path
from tests.parse_helpers import cut_copy, json_rows, run_parse

BT = "public/bandwidthtest/"
ALL = BT + "llmaction_8xH800_nvbandwidth_v0.2_all_tests.txt"
ONE = BT + "llmaction_8xH800_nvbandwidth_v0.2_d2d_read_ce.txt"


def _rows(relative: str) -> list[Row]:
    return parse_nvbandwidth(fixture_path(relative).read_text(), relative)


def _find(rows: list[Row], **want: object) -> list[Row]:
    return [r for r in rows if all(getattr(r, k) == v for k, v in want.items())]


def test_every_row_keeps_its_testcase(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_parse(capsys, "nvbandwidth", str(fixture_path(ALL)), "--json")
    assert status == 0
    rows = json_rows(out)
    assert all(r["status"] == "ok" and r["extra"]["test"] for r in rows)
    gpu0_gpu1 = [r for r in rows if (r["src"], r["dst"], r["op"]) == ("GPU0", "GPU1", "p2p")]
    # the same pair in 8 testcases: each row says which one (CE/SM, read/write, bidir)
    tests = [r["extra"]["test"] for r in gpu0_gpu1]
    assert len(tests) == len(set(tests)) == 8
    assert (
        "device_to_device_memcpy_read_ce" in tests and "device_to_device_memcpy_write_sm" in tests
    )
    assert len({r["extra"]["test"] for r in rows}) == 30  # every "Running ..." section


def test_printout_names_testcases_and_prints_matrices(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_parse(capsys, "nvbandwidth", str(fixture_path(ONE)))
    assert status == 0
    lines = out.splitlines()
    at = lines.index("Running device_to_device_memcpy_read_ce.")
    assert lines[at + 1] == "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)"
    assert lines[at + 2].split() == [str(i) for i in range(8)]
    assert lines[at + 3].split() == ["0", "N/A", "172.32", "172.57", "172.57", "172.32",
                                     "172.21", "172.13", "172.35"]  # fmt: skip
    assert "SUM device_to_device_memcpy_read_ce 9642.08" in lines


def test_all_tests_fixture() -> None:
    rows = _rows(ALL)
    h2d = _find(rows, op="h2d", bidirectional=False, dst="GPU0")
    ce = [r for r in h2d if r.extra["test"] == "host_to_device_memcpy_ce"]
    assert ce[0].algbw_gbps == 55.28 and ce[0].src == "host" and ce[0].memory == "pinned"
    assert ce[0].extra["sum_gbps"] == 442.52 and ce[0].extra["engine"] == "CE"
    assert ce[0].versions == {
        "nvbandwidth": "v0.2",
        "cuda_runtime": "11080",
        "cuda_driver": "12000",
        "driver": "525.105.17",
    }
    bi = [r for r in rows if r.extra["test"] == "device_to_host_bidirectional_memcpy_ce"]
    assert bi[1].op == "d2h" and bi[1].bidirectional and bi[1].src == "GPU1"
    assert bi[1].algbw_gbps == 50.50
    read = [r for r in rows if r.extra["test"] == "device_to_device_memcpy_read_ce"]
    assert len(read) == 56  # N/A diagonal: no row
    r = _find(read, src="GPU0", dst="GPU1")[0]
    assert r.algbw_gbps == 172.16 and r.peer_access is True
    write = [r for r in rows if r.extra["test"] == "device_to_device_memcpy_write_ce"]
    # "GPU(row) <- GPU(column)": row 0, column 1 is GPU1 -> GPU0
    assert _find(write, src="GPU1", dst="GPU0")[0].algbw_gbps == 176.08
    agg = [r for r in rows if r.extra["test"] == "all_to_host_memcpy_ce"]
    assert {r.extra.get("concurrent") for r in agg} == {"all"} and agg[0].op == "d2h"
    one = [r for r in rows if r.extra["test"] == "all_to_one_write_ce"]
    assert one[0].src == "all" and one[0].dst == "GPU0"


def test_single_testcase() -> None:
    rows = _rows(ONE)
    assert len(rows) == 56
    assert all(r.extra["sum_gbps"] == 9642.08 for r in rows)


def test_cut_inside_a_matrix_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_copy(tmp_path, ONE, "172.18       N/A    172.05", 24)  # "172.0" of 172.05
    status, out, _ = run_parse(capsys, "nvbandwidth", str(path), "--json")
    assert status == 0
    rows = json_rows(out)
    assert [r["status"] for r in rows] == ["ok"] * 7 + ["error"]
    assert all("sum_gbps" not in r["extra"] for r in rows)  # the SUM line never came
    assert rows[-1]["error"].startswith(
        f"{path}:24: testcase device_to_device_memcpy_read_ce: the file ends inside line 24"
    )
    assert rows[-1]["error"].endswith(
        "after 1 of 8 rows of 'memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)'"
    )
    assert rows[-1]["extra"]["test"] == "device_to_device_memcpy_read_ce"


def test_cut_in_the_sum_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_copy(tmp_path, ONE, "9642.08", 3)
    status, out, _ = run_parse(capsys, "nvbandwidth", str(path), "--json")
    rows = json_rows(out)
    assert status == 0 and len(rows) == 57
    assert all(r["extra"].get("sum_gbps") is None for r in rows)
    assert "before the SUM line of 'memcpy CE GPU(row)" in rows[-1]["error"]


def test_cut_after_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_copy(tmp_path, ALL, "Running device_to_device_memcpy_write_ce.", 42)
    status, out, _ = run_parse(capsys, "nvbandwidth", str(path), "--json")
    rows = json_rows(out)
    assert status == 0
    assert rows[-1]["error"] == (
        f"{path}:{path.read_text().count(chr(10))}: testcase device_to_device_memcpy_write_ce: "
        f"the output ends at line {path.read_text().count(chr(10))} before its matrix"
    )


NEWER = """nvbandwidth Version: v0.8
Built from Git version: v0.8

CUDA Runtime Version: 12080
CUDA Driver Version: 12080
Driver Version: 570.86.15

Device 0: NVIDIA H200 (00000000:06:00)
Device 1: NVIDIA H200 (00000000:07:00)

Running device_to_device_bidirectional_memcpy_read_ce.
memcpy CE GPU(row) <-> GPU(column) Read1 bandwidth (GB/s)
           0         1
 0       N/A    370.53
 1    371.00       N/A

SUM device_to_device_bidirectional_memcpy_read_ce_read1 741.53

memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)
           0         1
 0       N/A    741.06
 1    742.00       N/A

SUM device_to_device_bidirectional_memcpy_read_ce_total 1483.06

Waived:
Running device_local_copy.
memcpy local GPU(column) bandwidth (GB/s)
           0         1
 0   1890.00   1891.50

SUM device_local_copy 3781.50

NOTE: The reported results may not reflect the full capabilities of the platform.
Performance can vary with software drivers, hardware clocks, and system topology.

"""


def test_newer_layout_with_read1_total_and_a_waived_testcase() -> None:
    """The layout nvbandwidth v0.8's sources print (output.cpp, inline_common.h; the
    closing NOTE: output.cpp printInfo, after the last testcase)."""
    rows = parse_nvbandwidth(NEWER, "v08.txt")
    total = [r for r in rows if r.extra.get("matrix") == "Total"]
    assert [(r.src, r.dst, r.algbw_gbps) for r in total] == [
        ("GPU0", "GPU1", 741.06),
        ("GPU1", "GPU0", 742.00),
    ]
    assert total[0].extra["sum_key"] == "device_to_device_bidirectional_memcpy_read_ce_total"
    assert rows[0].extra["gpu_model"] == "NVIDIA H200"
    (waived,) = [r for r in rows if r.status == "error"]
    assert (
        waived.error
        == "v08.txt:26: nvbandwidth did not run a testcase (the output does not name it): Waived: no reason given"
    )
    local = [r for r in rows if r.extra.get("test") == "device_local_copy"]
    assert [(r.op, r.src, r.dst, r.algbw_gbps) for r in local] == [
        ("d2d", "GPU0", "GPU0", 1890.0),
        ("d2d", "GPU1", "GPU1", 1891.5),
    ]


def test_unknown_testcase_is_reported_not_dropped() -> None:
    text = NEWER.replace("device_local_copy", "host_to_mystery_sm")
    rows = parse_nvbandwidth(text, "x.txt")
    errors = [
        r.error for r in rows if r.status == "error" and "gpulane does not know" in (r.error or "")
    ]
    assert errors == [
        "x.txt:28: testcase host_to_mystery_sm: gpulane does not know what it copies where; "
        "its matrix is not imported"
    ]


@pytest.mark.parametrize("text", ["nvbandwidth Version: v0.2\n", "nothing\n"])
def test_no_testcase_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="no nvbandwidth testcase"):
        parse_nvbandwidth(text, "f.txt")
