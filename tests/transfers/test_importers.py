from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.errors import ParseError
from gpulane.record import Row, read_rows
from gpulane.transfers.importers import (
    main_bandwidthtest,
    main_nvbandwidth,
    main_p2p,
    parse_bandwidthtest,
    parse_nvbandwidth,
    parse_p2p,
)
from tests.conftest import fixture_path

BT = "public/bandwidthtest/"


def _text(name: str) -> str:
    return fixture_path(BT + name).read_text()


def _find(rows: list[Row], **want: object) -> list[Row]:
    return [r for r in rows if all(getattr(r, k) == v for k, v in want.items())]


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
    rows = parse_bandwidthtest(_text(name), name, "run1")
    assert len(rows) == 3
    by_op = {r.op: r for r in rows}
    assert by_op["h2d"].algbw_gbps == h2d and by_op["h2d"].src == "host"
    assert by_op["h2d"].dst == "GPU0"
    assert by_op["d2h"].algbw_gbps == d2h and by_op["d2h"].dst == "host"
    assert by_op["d2d"].algbw_gbps == d2d and by_op["d2d"].memory == "device"
    for r in rows:
        assert (r.kind, r.backend, r.source, r.run_id) == ("copy", "bandwidthTest", name, "run1")
        assert r.size_bytes == 32_000_000
        assert r.bidirectional is False and r.status == "ok"
    assert by_op["h2d"].memory == "pinned"
    assert by_op["h2d"].time_us == pytest.approx(32e6 / (h2d * 1e9) * 1e6)
    if model:
        assert by_op["h2d"].extra["gpu_model"] == model


def test_bandwidthtest_pageable_shmoo_mb_and_fail() -> None:
    text = """[CUDA Bandwidth Test] - Starting...
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
    rows = parse_bandwidthtest(text)
    assert [(r.op, r.memory, r.size_bytes) for r in rows] == [
        ("h2d", "pageable", 1024),
        ("h2d", "pageable", 2048),
        ("d2h", "pinned-wc", 1024),
    ]
    assert rows[0].algbw_gbps == pytest.approx(300.5 * 1048576 / 1e9)
    assert rows[0].extra["printed_mbps"] == 300.5
    assert all(r.status == "error" and "FAIL" in (r.error or "") for r in rows)


def test_p2p_no_peer_access() -> None:
    name = "autodl_2x2080ti_p2pBandwidthLatencyTest_noP2P.txt"
    rows = parse_p2p(_text(name), name)
    uni_off = _find(rows, op="p2p", bidirectional=False, peer_access=False, src="GPU0", dst="GPU1")
    bw = [r for r in uni_off if r.algbw_gbps is not None]
    assert [r.algbw_gbps for r in bw] == [5.71]
    bi_on = _find(rows, op="p2p", bidirectional=True, peer_access=True, src="GPU1", dst="GPU0")
    assert bi_on[0].algbw_gbps == pytest.approx(6.10 / 2)  # printed: sum of both directions
    assert bi_on[0].extra["printed_gbps"] == 6.10
    lat = [r for r in rows if r.extra.get("test") == "latency"]
    gpu_lat = _find(lat, src="GPU0", dst="GPU1", peer_access=False)
    assert {r.extra["timer"]: r.time_us for r in gpu_lat} == {"gpu": 14.76, "cpu": 11.08}
    diag = _find(rows, op="d2d", src="GPU0", dst="GPU0", peer_access=False, bidirectional=False)
    assert diag[0].algbw_gbps == 541.84
    # 4 bandwidth + 2 latency (gpu, cpu) ... each a 2x2 matrix
    assert len(rows) == (4 + 4) * 4
    assert all(r.backend == "p2pBandwidthLatencyTest" and r.size_bytes is None for r in rows)


def test_p2p_four_gpus_peer_writes() -> None:
    name = "stelline_asus_4xRTX6000Ada_p2pBandwidthLatencyTest.txt"
    rows = parse_p2p(_text(name), name)
    on = _find(rows, op="p2p", bidirectional=False, peer_access=True, src="GPU2", dst="GPU3")
    assert on[0].algbw_gbps == 26.32 and on[0].extra["p2p_method"] == "writes"
    assert on[0].extra["gpu_model"] == "NVIDIA RTX 6000 Ada Generation"
    lat_on = [r for r in on if r.extra.get("test") == "latency" and r.extra["timer"] == "gpu"]
    assert lat_on[0].time_us == 1.34
    assert len(rows) == 8 * 16


def test_nvbandwidth_all_tests() -> None:
    name = "llmaction_8xH800_nvbandwidth_v0.2_all_tests.txt"
    rows = parse_nvbandwidth(_text(name), name)
    h2d = _find(rows, op="h2d", bidirectional=False, dst="GPU0")
    ce = [r for r in h2d if r.extra["test"] == "host_to_device_memcpy_ce"]
    assert ce[0].algbw_gbps == 55.28 and ce[0].src == "host" and ce[0].memory == "pinned"
    assert ce[0].extra["sum_gbps"] == 442.52
    assert ce[0].versions == {
        "nvbandwidth": "v0.2",
        "cuda_driver": "12000",
        "driver": "525.105.17",
    }
    bi = [r for r in rows if r.extra["test"] == "device_to_host_bidirectional_memcpy_ce"]
    assert bi[1].op == "d2h" and bi[1].bidirectional and bi[1].src == "GPU1"
    assert bi[1].algbw_gbps == 50.50
    read = [r for r in rows if r.extra["test"] == "device_to_device_memcpy_read_ce"]
    assert len(read) == 56  # N/A diagonal skipped
    r = _find(read, src="GPU0", dst="GPU1")[0]
    assert r.algbw_gbps == 172.16 and r.peer_access is True
    write = [r for r in rows if r.extra["test"] == "device_to_device_memcpy_write_ce"]
    # "GPU(row) <- GPU(column)": row 0, column 1 is GPU1 -> GPU0
    assert _find(write, src="GPU1", dst="GPU0")[0].algbw_gbps == 176.08
    agg = [r for r in rows if r.extra["test"] == "all_to_host_memcpy_ce"]
    assert {r.extra.get("concurrent") for r in agg} == {"all"} and agg[0].op == "d2h"
    one = [r for r in rows if r.extra["test"] == "all_to_one_write_ce"]
    assert one[0].src == "all" and one[0].dst == "GPU0"
    assert len({r.extra["test"] for r in rows}) == 30  # every "Running ..." section


def test_nvbandwidth_single_test() -> None:
    name = "llmaction_8xH800_nvbandwidth_v0.2_d2d_read_ce.txt"
    rows = parse_nvbandwidth(_text(name), name)
    assert len(rows) == 56
    assert all(r.extra["sum_gbps"] == 9642.08 for r in rows)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_bandwidthtest, "nothing here\n"),
        (parse_p2p, "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n"),
        (parse_nvbandwidth, "nvbandwidth Version: v0.2\n"),
        (parse_nvbandwidth, ""),
    ],
)
def test_no_tables_is_a_parse_error(parse: object, text: str) -> None:
    with pytest.raises(ParseError, match="no "):
        parse(text, "f.txt")  # type: ignore[operator]


def test_cut_off_matrix_names_the_line() -> None:
    text = _text("autodl_2x2080ti_p2pBandwidthLatencyTest_noP2P.txt").splitlines()
    text[15] = "     0 541.84"  # one value for two columns
    with pytest.raises(ParseError) as err:
        parse_p2p("\n".join(text), "cut.txt")
    assert err.value.source == "cut.txt" and err.value.line == 16


def test_wrong_importer_gives_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_bandwidthtest(_text("llmaction_8xH800_nvbandwidth_v0.2_d2d_read_ce.txt"))
    with pytest.raises(ParseError):
        parse_p2p(_text("autodl_2080ti_bandwidthTest.txt"))


ALL = sorted(p.name for p in fixture_path(BT.rstrip("/")).iterdir())
PARSERS = {"bandwidthTest": parse_bandwidthtest, "p2p": parse_p2p, "nvbandwidth": parse_nvbandwidth}


def _parser(name: str):  # type: ignore[no-untyped-def]
    if "nvbandwidth" in name:
        return parse_nvbandwidth
    if "p2p" in name:
        return parse_p2p
    return parse_bandwidthtest


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(ALL),
    cut=st.floats(0, 1),
    junk=st.text(alphabet=" 0123456789.-NA/\t\nxD\\", max_size=12),
    at=st.floats(0, 1),
)
def test_fuzz_mutated_fixtures_fail_only_with_parse_error(
    name: str, cut: float, junk: str, at: float
) -> None:
    text = _text(name)
    text = text[: int(len(text) * max(cut, 0.05))] if cut < 0.5 else text
    pos = int(len(text) * at)
    text = text[:pos] + junk + text[pos:]
    try:
        rows = _parser(name)(text, name)
    except ParseError as err:
        assert err.source == name
        return
    assert rows
    for r in rows:
        assert r.kind == "copy" and r.op in ("h2d", "d2h", "p2p", "d2d")
        assert r.algbw_gbps is None or r.algbw_gbps >= 0 or "-" in junk


def test_main_json_and_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = fixture_path(BT + "autodl_2080ti_bandwidthTest.txt")
    assert main_bandwidthtest([str(f), "--json", "--out", str(tmp_path), "--build", "old"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == 3 and all(r["build"] == "old" and r["source"] == str(f) for r in rows)
    stored = list(read_rows(tmp_path))
    assert len(stored) == 3
    assert len(list(tmp_path.glob("*/rows.parquet"))) == 1


def test_main_table_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = fixture_path(BT + "stelline_asus_4xRTX6000Ada_p2pBandwidthLatencyTest.txt")
    assert main_p2p([str(f)]) == 0
    out = capsys.readouterr().out
    assert "p2pBandwidthLatencyTest" in out and "GPU3" in out
    g = fixture_path(BT + "llmaction_8xH800_nvbandwidth_v0.2_d2d_read_ce.txt")
    assert main_nvbandwidth([str(g)]) == 0
    assert main_nvbandwidth([]) == 2


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulane.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_parse_command_end_to_end(tmp_path: Path) -> None:
    f = fixture_path(BT + "llmaction_8xH800_nvbandwidth_v0.2_all_tests.txt")
    res = _cli("parse", "nvbandwidth", str(f), "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "nvbandwidth" in res.stdout
    assert len(list(read_rows(tmp_path))) > 500


def test_parse_command_bad_file_is_one_line() -> None:
    f = fixture_path(BT + "autodl_2080ti_bandwidthTest.txt")
    res = _cli("parse", "p2p", str(f))
    assert res.returncode == 2
    assert res.stderr.startswith("gpulane: error: ") and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = _cli("parse", "bandwidthtest", "/no/such/file.txt")
    assert res.returncode == 2 and "cannot read" in res.stderr
