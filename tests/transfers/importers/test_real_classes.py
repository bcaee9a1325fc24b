"""Real bandwidthTest and nvbandwidth outputs of classes read wrong before (issue 43, 3).

* bandwidthTest ``--csv`` (superbenchmark's captured V100 shmoo logs): one
  ``bandwidthTest-H2D-Pinned, Bandwidth = ... GB/s, ..., Size = N bytes`` line per figure.
* nvbandwidth placeholders: the ``0.00`` diagonal of its README's 8-GPU example, the
  ``N/A`` diagonal of v0.2: never rows.
* nvbandwidth stopping on its own failure: the data check's ASSERT (issue #34, v0.7), a
  CUDA error (issue #47, v0.8), the data check then ``Aborted`` (issue #19, v0.4): one
  error row quoting it, not a file cut short.

Sources: tests/fixtures/public/SOURCES.md. Each file is also read cut at random offsets
and as UTF-16, and through ``gpulane parse``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.errors import ParseError
from gpulane.record import Row
from gpulane.transfers.importers import bandwidthtest, nvbandwidth
from tests.conftest import fixture_path
from tests.parse_helpers import encoded_copy, json_rows, random_cut, run_parse

BT = "public/bandwidthtest/"
CSV_H2D = BT + "superbench_V100pcie_bandwidthTest_csv_shmoo_h2d_pinned.txt"
CSV_D2D = BT + "superbench_V100pcie_bandwidthTest_csv_shmoo_d2d.txt"
ZEROS = BT + "nvbandwidth_readme_8gpu_d2d_write_ce_diagonal_zeros_FRAGMENT.txt"
V02 = BT + "llmaction_8xH800_nvbandwidth_v0.2_all_tests.txt"
ASSERT = BT + "nvbandwidth34_8xA100_v0.7_d2d_read_ce_pattern_ASSERT.txt"
CUDA = BT + "nvbandwidth47_rtx3080_v0.8_d2h_ce_CUDA_ERROR_INVALID_CONTEXT.txt"
ABORTED = BT + "nvbandwidth19_8xL40S_v0.4_one_to_all_read_sm_pattern_Aborted.txt"

_CSV_LINE = re.compile(r"^bandwidthTest-(\w+)[^,]*, Bandwidth = ([\d.]+) GB/s.*Size = (\d+) bytes")


def _text(rel: str) -> str:
    return fixture_path(rel).read_text()


# ------------------------------------------------------------------ bandwidthTest --csv


@pytest.mark.parametrize(
    ("rel", "op", "memory"), [(CSV_H2D, "h2d", "pinned"), (CSV_D2D, "d2d", "device")]
)
def test_csv_lines_are_rows_as_printed(rel: str, op: str, memory: str) -> None:
    printed = [m.groups() for ln in _text(rel).splitlines() if (m := _CSV_LINE.match(ln))]
    assert len(printed) == 81
    rows = bandwidthtest.parse_bandwidthtest(_text(rel), rel)
    assert all(r.status == "ok" for r in rows)
    got = [(r.op, r.size_bytes, r.algbw_gbps, r.memory) for r in rows]
    assert got == [(op, int(size), float(bw), memory) for _, bw, size in printed]
    assert {r.extra["gpu_model"] for r in rows} == {"Tesla V100-PCIE-32GB"}
    assert {r.extra["result"] for r in rows} == {"PASS"}


def test_csv_cli_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_parse(capsys, "bandwidthtest", str(fixture_path(CSV_H2D)), "--json")
    assert status == 0, err
    rows = json_rows(out)
    assert len(rows) == 81 and all(r["status"] == "ok" for r in rows)
    assert "no figures above it" not in out + err


def test_csv_line_of_other_builds() -> None:
    # The form: 'PinnedMemory', no Time field, 'Bytes'; an older build's MB/s.
    text = (
        "bandwidthTest-H2D-PinnedMemory, Bandwidth = 24.6 GB/s, Size = 33554432 Bytes, "
        "NumDevsUsed = 1\n"
        "bandwidthTest-D2H-Paged, Bandwidth = 11659.1 MB/s, Time = 0.01098 s, "
        "Size = 134217728 bytes, NumDevsUsed = 1\nResult = PASS\n"
    )
    a, b = bandwidthtest.parse_bandwidthtest(text, "x")
    assert (a.op, a.memory, a.algbw_gbps, a.size_bytes) == ("h2d", "pinned", 24.6, 33554432)
    assert (b.op, b.memory, b.size_bytes) == ("d2h", "pageable", 134217728)
    assert b.algbw_gbps == pytest.approx(11659.1 * 2**20 / 1e9)


# ------------------------------------------------------------- nvbandwidth placeholders


def test_zero_diagonal_is_no_row() -> None:
    rows = nvbandwidth.parse_nvbandwidth(_text(ZEROS), ZEROS)
    measured = [r for r in rows if r.status == "ok"]
    assert len(measured) == 8 * 7  # every off-diagonal cell, no diagonal
    assert all(r.algbw_gbps and r.algbw_gbps > 270 for r in measured)
    assert all(r.src != r.dst for r in measured)
    # The README shows no SUM line: one error for that, nothing else.
    errors = [r for r in rows if r.status != "ok"]
    assert len(errors) == 1 and "SUM line" in (errors[0].error or "")


def test_no_placeholder_rows_in_a_full_run() -> None:
    rows = nvbandwidth.parse_nvbandwidth(_text(V02), V02)
    assert rows and all(r.status == "ok" for r in rows)
    assert all(r.algbw_gbps or r.time_us for r in rows)
    assert not [r for r in rows if r.op == "p2p" and r.src == r.dst]
    na_cells = sum(ln.split().count("N/A") for ln in _text(V02).splitlines())
    assert na_cells > 0  # the v0.2 file prints its diagonals as N/A


# ------------------------------------------------------------- nvbandwidth failures


@pytest.mark.parametrize(
    ("rel", "event", "quoted"),
    [
        (ASSERT, "data_mismatch", "ASSERT in expression h_errorFlag == 0"),
        (CUDA, "cuda", "[CUDA_ERROR_INVALID_CONTEXT] invalid device context"),
        (ABORTED, "data_mismatch", "Aborted (core dumped)"),
    ],
)
def test_a_named_failure_is_quoted(rel: str, event: str, quoted: str) -> None:
    (row,) = nvbandwidth.parse_nvbandwidth(_text(rel), rel)
    assert row.status == "error" and row.extra["event"] == event
    assert quoted in (row.error or "")
    assert "ends" not in (row.error or "") and "cut" not in (row.error or "")
    if event == "data_mismatch":
        assert "did not match" in (row.error or "")
        assert "Invalid value when checking the pattern" in (row.error or "")


def test_failure_cli_exits_1_and_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_parse(capsys, "nvbandwidth", str(fixture_path(ASSERT)))
    assert status == 1  # nothing was measured: every run in the file failed
    assert "ASSERT in expression h_errorFlag == 0" in out
    assert "Traceback" not in err


# ------------------------------------------------------------- cut and UTF-16 copies

_PARSERS = {CSV_H2D: bandwidthtest, ZEROS: nvbandwidth, ASSERT: nvbandwidth, V02: nvbandwidth}


def _stream(mod: object, path: Path) -> list[Row] | None:
    try:
        return list(mod.stream_rows(str(path), run_id="r", build="b"))  # type: ignore[attr-defined]
    except ParseError as err:
        assert str(path) in str(err)
        return None


@pytest.mark.parametrize("rel", sorted(_PARSERS))
def test_utf16_copy_reads_as_the_original(tmp_path: Path, rel: str) -> None:
    mod = _PARSERS[rel]
    copy = encoded_copy(tmp_path, _text(rel), name=Path(rel).name)

    def key(rows: list[Row] | None) -> list[tuple[object, ...]]:
        return [(r.op, r.src, r.dst, r.size_bytes, r.algbw_gbps, r.status) for r in rows or []]

    assert key(_stream(mod, copy)) == key(_stream(mod, fixture_path(rel)))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(_PARSERS)), st.sampled_from(("utf-8", "utf-16")), st.data())
def test_cut_anywhere_keeps_the_rows_before_the_cut(
    rel: str, codec: str, data: st.DataObject
) -> None:
    mod = _PARSERS[rel]
    whole = _stream(mod, fixture_path(rel)) or []
    by_line = {(r.extra.get("line"), r.src, r.dst): r for r in whole if r.status == "ok"}
    with random_cut(data, _text(rel), codec, Path(rel).name) as (path, kept):
        rows = _stream(mod, path)
    if rows is None:
        return  # reported as not that tool's output (cut before anything it prints)
    for row in rows:
        if row.status == "ok":
            same = by_line[(row.extra.get("line"), row.src, row.dst)]
            assert (row.size_bytes, row.algbw_gbps) == (same.size_bytes, same.algbw_gbps)
    ok = [r for r in rows if r.status == "ok"]
    errors = [r for r in rows if r.status != "ok"]
    if len(ok) < len(by_line):
        last = kept.decode(codec, errors="ignore").rstrip().splitlines()[-1]
        if not errors:
            # nvbandwidth prints no end line: a cut right after a testcase's SUM (or its
            # Waived line) leaves a whole, shorter output, which cannot be told apart.
            assert last.startswith(("SUM ", "Waived"))
        else:
            assert len(errors) == 1 and errors[0].error  # one error: where it stops
