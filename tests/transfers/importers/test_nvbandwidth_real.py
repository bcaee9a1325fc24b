"""Real nvbandwidth outputs of the shapes users paste (tests/fixtures/public/nvbandwidth,
cited in tests/fixtures/public/SOURCES.md): a matrix with no ``Running`` line (named by
its SUM line), quoted ``> Running`` lines, v0.2's ``Waiving``, v0.10's closing NOTE and
an output cut exactly between two testcases (seen from v0.6 on, by that NOTE).

The rules: a complete file imports whole, exit 0; a cut copy gives the rows before the
cut and one error; placeholders never become rows; a UTF-16 copy reads as the original."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.errors import ParseError
from gpulane.record import Row
from gpulane.transfers.importers import nvbandwidth
from tests.conftest import fixture_path
from tests.parse_helpers import json_rows, run_parse

NB = "public/nvbandwidth/"
NO_RUNNING = NB + "nvbandwidth50_6xA6000_v0.8_d2d_read_ce_no_Running_line_EXCERPT.txt"
QUOTED = NB + "nvbandwidth24_8xH100_h2d_d2h_sm_quoted_Running_no_SUM_EXCERPT.txt"
WAIVING = NB + "nvbandwidth13_2x2080Ti_v0.2_d2d_write_ce_Waiving.txt"
WHOLE = NB + "notes_8xH100_nvbandwidth_v0.10_d2d_read_ce_closing_NOTE.txt"
BETWEEN = NB + "notes_7gpu_nvbandwidth_v0.10_ce_tests_CUT_between_testcases.txt"
ALL = [NO_RUNNING, QUOTED, WAIVING, WHOLE, BETWEEN]


def _text(rel: str) -> str:
    return fixture_path(rel).read_text()


def _rows(path: Path | str) -> list[Row] | None:
    try:
        return list(nvbandwidth.stream_rows(str(path), run_id="r", build="b"))
    except ParseError as err:
        assert str(path) in str(err)
        return None


def _matrix_cells(rel: str) -> list[tuple[int, int, str]]:
    """(row, column, cell) of every matrix row in the file, read here on their own."""
    out, cols = [], None
    for line in _text(rel).splitlines():
        parts = line.split()
        if "(GB/s)" in line:
            cols = None
        elif parts and all(p.isdigit() for p in parts) and cols is None:
            cols = [int(p) for p in parts]
        elif parts and parts[0].isdigit() and cols is not None:
            out += [(int(parts[0]), c, v) for c, v in zip(cols, parts[1:], strict=True)]
    return out


def test_complete_v010_file_imports_whole_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_parse(capsys, "nvbandwidth", str(fixture_path(WHOLE)), "--json")
    assert status == 0, err
    rows = json_rows(out)
    cells = [(r, c, v) for r, c, v in _matrix_cells(WHOLE) if v != "N/A"]
    assert len(rows) == len(cells) == 56  # 8x8, the N/A diagonal left out
    assert all(r["status"] == "ok" for r in rows)
    got = {(r["extra"]["row"], r["extra"]["col"]): r["algbw_gbps"] for r in rows}
    assert got == {(r, c): float(v) for r, c, v in cells}
    assert {r["extra"]["sum_gbps"] for r in rows} == {22126.64}


def test_no_running_line_is_named_by_its_sum_line() -> None:
    rows = _rows(fixture_path(NO_RUNNING)) or []
    ok = [r for r in rows if r.status == "ok"]
    assert len(ok) == 30  # 6x6 off the diagonal: the N/A cells are no rows
    assert {r.extra["test"] for r in ok} == {"device_to_device_memcpy_read_ce"}
    assert {(r.op, r.extra["engine"], r.peer_access) for r in ok} == {("p2p", "CE", True)}
    first = next(r for r in ok if (r.src, r.dst) == ("GPU0", "GPU1"))
    assert (first.algbw_gbps, first.extra["sum_gbps"]) == (26.34, 715.53)
    assert all(r.src != r.dst for r in ok)
    # v0.8 prints its closing NOTE after the last testcase; the paste stops at the SUM
    (err,) = [r for r in rows if r.status == "error"]
    assert err.error == (
        f"{fixture_path(NO_RUNNING)}:19: the output ends at line 19 after testcase "
        "device_to_device_memcpy_read_ce without the closing NOTE that nvbandwidth v0.8 "
        "prints after its last testcase: cut off"
    )


def test_no_running_line_cut_before_its_sum_names_nothing(tmp_path: Path) -> None:
    text = _text(NO_RUNNING)
    path = tmp_path / "cut.txt"
    path.write_text(text[: text.index("SUM ")])
    rows = _rows(path) or []
    (err,) = rows  # no cell of a matrix its file never named becomes a row
    assert err.status == "error"
    assert "a matrix with no Running line before it ('memcpy CE GPU(row) -> GPU(column)" in (
        err.error or ""
    )
    assert "before the SUM line that names its testcase" in (err.error or "")


def test_quoted_running_lines_and_missing_sums() -> None:
    rows = _rows(fixture_path(QUOTED)) or []
    ok = [r for r in rows if r.status == "ok"]
    assert [(r.op, r.src, r.dst) for r in ok[:2]] == [
        ("h2d", "host", "GPU0"),
        ("h2d", "host", "GPU1"),
    ]
    assert {r.extra["test"]: r.extra["engine"] for r in ok} == {
        "host_to_device_memcpy_sm": "SM",
        "device_to_host_memcpy_sm": "SM",
    }
    assert [r.algbw_gbps for r in ok if r.op == "d2h"][3] == 52.78
    errors = [r.error or "" for r in rows if r.status == "error"]
    assert len(ok) == 16 and len(errors) == 2  # the paste dropped both SUM lines
    assert all("before the SUM line of 'memcpy SM CPU(row)" in e for e in errors)


def test_waiving_names_the_testcase(capsys: pytest.CaptureFixture[str]) -> None:
    (row,) = _rows(fixture_path(WAIVING)) or []
    assert row.status == "error" and row.extra["test"] == "device_to_device_memcpy_write_ce"
    assert "nvbandwidth did not run testcase device_to_device_memcpy_write_ce: Waiving" in (
        row.error or ""
    )
    status, _, err = run_parse(capsys, "nvbandwidth", str(fixture_path(WAIVING)))
    assert status == 1 and "nothing measured" in err  # not "no nvbandwidth testcase found"


def test_cut_exactly_between_testcases_is_seen_from_v06() -> None:
    rows = _rows(fixture_path(BETWEEN)) or []
    ok = [r for r in rows if r.status == "ok"]
    assert len(ok) == 4 * 7 + 2 * 42 + 3 * 42  # 4 host rows of 7 GPUs, 5 GPU x GPU matrices
    (err,) = [r for r in rows if r.status == "error"]
    assert "after testcase device_to_device_bidirectional_memcpy_read_ce without the " in (
        err.error or ""
    )
    assert "closing NOTE that nvbandwidth v0.10.0 prints" in (err.error or "")


def test_whole_file_less_its_closing_note_is_cut(tmp_path: Path) -> None:
    text = _text(WHOLE)
    path = tmp_path / "no_note.txt"
    path.write_text(text[: text.index("NOTE: The reported")])
    rows = _rows(path) or []
    assert [r.status for r in rows].count("error") == 1
    assert len([r for r in rows if r.status == "ok"]) == 56


@pytest.mark.parametrize("rel", ALL)
def test_placeholders_never_rows(rel: str) -> None:
    rows = [r for r in _rows(fixture_path(rel)) or [] if r.status == "ok"]
    assert all(r.algbw_gbps for r in rows)  # no N/A, no 0.00 becomes a measured copy
    assert not [r for r in rows if r.op == "p2p" and r.src == r.dst]
    real = [v for _, _, v in _matrix_cells(rel) if v not in ("N/A", "0.00")]
    assert len(rows) == len(real)


@pytest.mark.parametrize("rel", ALL)
def test_utf16_copy_reads_as_the_original(tmp_path: Path, rel: str) -> None:
    copy = tmp_path / Path(rel).name
    copy.write_bytes(_text(rel).encode("utf-16"))

    def key(rows: list[Row] | None) -> list[tuple[object, ...]]:
        return [
            (r.op, r.src, r.dst, r.algbw_gbps, r.status, r.extra.get("test")) for r in rows or []
        ]

    assert key(_rows(copy)) == key(_rows(fixture_path(rel)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([NO_RUNNING, WHOLE, BETWEEN]), st.data())
def test_cut_anywhere_gives_rows_before_the_cut_and_one_error(
    rel: str, data: st.DataObject
) -> None:
    """v0.8 and v0.10 outputs: every cut is seen (inside a matrix, before a SUM line, or
    between testcases by the missing closing NOTE), with exactly one error row."""
    whole = _rows(fixture_path(rel)) or []
    by_cell = {(r.extra["line"], r.src, r.dst): r.algbw_gbps for r in whole if r.status == "ok"}
    blob = _text(rel).encode()
    cut = data.draw(st.integers(1, len(blob) - 1), label="cut")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cut.txt"
        path.write_bytes(blob[:cut])
        rows = _rows(path)
    if rows is None:
        return  # cut before its first testcase: not an nvbandwidth output yet
    ok = [r for r in rows if r.status == "ok"]
    for r in ok:  # the rows before the cut, as in the whole file
        assert by_cell[(r.extra["line"], r.src, r.dst)] == r.algbw_gbps
    errors = [r for r in rows if r.status == "error"]
    assert len(errors) == 1, [r.error for r in errors]


def test_runs_one_after_another_each_judged_by_its_note(tmp_path: Path) -> None:
    """A log of several runs (as the notes behind WHOLE hold five): a run cut between
    testcases is seen where the next run's header starts; whole runs give no error."""
    path = tmp_path / "runs.txt"
    path.write_text(_text(WHOLE) + "\n" + _text(WHOLE))
    rows = _rows(path) or []
    assert [r.status for r in rows].count("error") == 0 and len(rows) == 2 * 56
    path.write_text(_text(BETWEEN) + "\n" + _text(WHOLE))
    rows = _rows(path) or []
    (err,) = [r for r in rows if r.status == "error"]
    at = _text(BETWEEN).count("\n") + 2  # the second run's "nvbandwidth Version:" line
    assert err.error == (
        f"{path}:{at}: the run before line {at} ends after testcase "
        "device_to_device_bidirectional_memcpy_read_ce without the closing NOTE that "
        "nvbandwidth v0.10.0 prints: cut off"
    )
    assert len([r for r in rows if r.status == "ok"]) == 238 + 56
