"""p2pBandwidthLatencyTest printouts as copy rows: what the file says about peer access,
printed bidirectional figures, labelled latency timers, and cut copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.errors import ParseError
from gpulane.record import Row
from gpulane.transfers.importers.p2p import parse_p2p
from tests.conftest import fixture_path
from tests.parse_helpers import cut_copy, json_rows, run_parse

BT = "public/bandwidthtest/"
NO_P2P = BT + "autodl_2x2080ti_p2pBandwidthLatencyTest_noP2P.txt"
ADA4 = BT + "stelline_asus_4xRTX6000Ada_p2pBandwidthLatencyTest.txt"


def _text(relative: str) -> str:
    return fixture_path(relative).read_text()


def _find(rows: list[Row], **want: object) -> list[Row]:
    return [r for r in rows if all(getattr(r, k) == v for k, v in want.items())]


def test_the_files_own_statement_on_peer_access_wins(capsys: pytest.CaptureFixture[str]) -> None:
    """`Device=0 CANNOT Access Peer Device=1`: rows under P2P=Enabled say no peer access."""
    status, out, _ = run_parse(capsys, "p2p", str(fixture_path(NO_P2P)), "--json")
    assert status == 0
    rows = json_rows(out)
    enabled = [r for r in rows if r["extra"]["p2p_requested"] and r["op"] == "p2p"]
    assert len(enabled) == 2 * 4  # 2 pairs x (uni, bi, GPU latency, CPU latency)
    assert {r["peer_access"] for r in enabled} == {False}
    assert all("no peer access" in r["extra"]["note"] for r in enabled)
    uni = [r for r in enabled if r["extra"]["section"].startswith("Unidirectional")]
    assert {(r["src"], r["dst"]): r["algbw_gbps"] for r in uni} == {
        ("GPU0", "GPU1"): 5.72,
        ("GPU1", "GPU0"): 5.72,
    }
    diagonal = [r for r in rows if r["op"] == "d2d"]
    assert {r["peer_access"] for r in diagonal} == {None}


def test_peer_access_from_the_connectivity_matrix_alone() -> None:
    text = _text(NO_P2P).replace("Device=0 CANNOT Access Peer Device=1\n", "")
    rows = parse_p2p(text, "x.txt")
    on = _find(rows, op="p2p", src="GPU0", dst="GPU1", bidirectional=False)
    assert {r.peer_access for r in on if r.extra["p2p_requested"]} == {False}


def test_no_statement_means_unknown() -> None:
    text = _text(ADA4)
    text = "\n".join(line for line in text.splitlines() if "Access Peer" not in line).replace(
        "P2P Connectivity Matrix", ""
    )
    text = text[: text.index("     D\\D")] + text[text.index("Unidirectional P2P=Disabled") :]
    rows = parse_p2p(text, "x.txt")
    on = _find(rows, op="p2p", src="GPU2", dst="GPU3", bidirectional=False)
    assert {r.peer_access for r in on if r.extra["p2p_requested"]} == {None}
    assert {r.peer_access for r in on if not r.extra["p2p_requested"]} == {False}


def test_four_gpus_with_peer_access() -> None:
    rows = parse_p2p(_text(ADA4), "ada.txt")
    on = _find(rows, op="p2p", bidirectional=False, peer_access=True, src="GPU2", dst="GPU3")
    bw = [r for r in on if r.algbw_gbps is not None]
    assert bw[0].algbw_gbps == 26.32 and bw[0].extra["p2p_method"] == "writes"
    assert bw[0].extra["gpu_model"] == "NVIDIA RTX 6000 Ada Generation"
    gpu_lat = [r for r in on if r.extra.get("timer") == "gpu"]
    assert gpu_lat[0].time_us == 1.34
    assert len(rows) == 8 * 16 and all(r.status == "ok" for r in rows)


def test_bidirectional_keeps_the_printed_figure() -> None:
    rows = parse_p2p(_text(ADA4), "ada.txt")
    (bi,) = _find(rows, bidirectional=True, peer_access=True, src="GPU1", dst="GPU2")
    assert bi.algbw_gbps == 52.12  # as printed: both directions together
    assert bi.extra["figure"] == "sum of both directions"
    assert bi.extra["per_direction_gbps"] == pytest.approx(26.06)


def test_latency_timers_are_labelled(capsys: pytest.CaptureFixture[str]) -> None:
    rows = parse_p2p(_text(NO_P2P), "x.txt")
    lat = _find(rows, src="GPU0", dst="GPU1", peer_access=False)
    lat = [r for r in lat if r.extra.get("test") == "latency" and not r.extra["p2p_requested"]]
    assert {r.extra["timer"]: r.time_us for r in lat} == {"gpu": 14.76, "cpu": 11.08}
    status, out, _ = run_parse(capsys, "p2p", str(fixture_path(NO_P2P)))
    assert status == 0
    block = out[out.index("P2P=Disabled Latency Matrix (us)") :].splitlines()
    assert block[1].strip() == "GPU timer: CUDA events, time per copy"
    assert block[2].split() == ["GPU", "0", "1"] and block[3].split() == ["0", "1.33", "14.76"]
    assert block[5].strip().startswith("CPU timer: host clock, time to issue one copy")
    assert block[6].split() == ["CPU", "0", "1"] and block[7].split() == ["0", "3.55", "11.08"]


def test_printout_shows_printed_and_per_direction_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = run_parse(capsys, "p2p", str(fixture_path(ADA4)))
    assert status == 0
    block = out[out.index("Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)") :].splitlines()
    assert block[1] == "   D\\D     0      1      2      3"
    assert block[2] == "     0 804.38  52.10  52.10  52.11"
    assert block[6].strip() == "per direction (half of each printed sum):"
    assert block[8].split() == ["0", "402.19", "26.05", "26.05", "26.05"]


def test_p2p_reads_copy_from_the_column() -> None:
    text = _text(ADA4).replace(
        "Bidirectional P2P=Disabled",
        "Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)\n"
        "   D\\D     0      1      2      3\n"
        "     0 802.93  11.11  26.32  26.32\n"
        "     1  26.32 833.33  26.32  26.32\n"
        "     2  26.32  26.32 830.69  26.32\n"
        "     3  26.33  26.33  26.33 829.35\n"
        "Bidirectional P2P=Disabled",
        1,
    )
    rows = parse_p2p(text, "reads.txt")
    reads = [r for r in rows if r.extra.get("p2p_method") == "reads" and r.algbw_gbps == 11.11]
    assert [(r.src, r.dst) for r in reads] == [("GPU1", "GPU0")]
    # --p2p_read also prints a read latency matrix: the file above lacks it.
    assert "P2P=Enabled Latency (P2P Reads) Matrix (us)" in (rows[-1].error or "")


def test_cut_inside_a_matrix_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_copy(tmp_path, ADA4, "805.20  52.12", 11)  # "52.1" of GPU1 -> GPU2's 52.12
    line = path.read_text().count("\n") + 1
    status, out, _ = run_parse(capsys, "p2p", str(path), "--json")
    assert status == 0
    rows = json_rows(out)
    section = [r for r in rows if r["extra"].get("section", "").startswith("Bidirectional P2P=E")]
    assert [(r["src"], r["dst"]) for r in section] == [("GPU0", f"GPU{c}") for c in range(4)]
    cut = rows[-1]
    assert cut["status"] == "error"
    assert cut["error"].startswith(f"{path}:{line}: the file ends inside a row of 'Bidirectional")
    assert "missing: 'Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)'" in cut["error"]
    assert "'P2P=Enabled Latency (P2P Writes) Matrix (us)'" in cut["error"]


def test_cut_between_the_latency_timers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _text(ADA4)
    path = tmp_path / "p2p.txt"
    path.write_text(text[: text.rindex("   CPU")])
    status, out, _ = run_parse(capsys, "p2p", str(path), "--json")
    assert status == 0
    cut = json_rows(out)[-1]
    assert (
        "after the GPU-timer matrix of 'P2P=Enabled Latency (P2P Writes) Matrix (us)'"
        in (cut["error"])
    )
    assert "missing: the CPU-timer matrix of 'P2P=Enabled Latency" in cut["error"]


def test_damaged_row_is_a_parse_error() -> None:
    lines = _text(NO_P2P).splitlines()
    lines[15] = "     0 541.84"  # one value for two columns, on a complete line
    with pytest.raises(ParseError) as err:
        parse_p2p("\n".join(lines) + "\n", "bad.txt")
    assert err.value.source == "bad.txt" and err.value.line == 16


def test_other_files_are_parse_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ParseError, match="no p2pBandwidthLatencyTest matrix"):
        parse_p2p("nothing\n", "f.txt")
    with pytest.raises(ParseError):
        parse_p2p(_text(BT + "autodl_2080ti_bandwidthTest.txt"))
    status, _, _ = run_parse(
        capsys, "p2p", str(fixture_path(BT + "autodl_2080ti_bandwidthTest.txt"))
    )
    assert status == 2
