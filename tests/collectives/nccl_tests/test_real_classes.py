"""Real nccl-tests logs of two classes read wrong before (issue 43, part 3).

* nccl-tests 2.10-2.13 print an empty redop for collectives that reduce nothing: the
  header names the column, the lines leave it out (msccl issue #48, alltoall on 16 A100).
  Each line is read whole; the excerpt has no footer, so it ends in one cut-off error.
* A log whose header lists no devices: the world size comes from NCCL's INFO lines
  (``comm 0x.. rank 0 nranks 4 cudaDev 0 ...``), here nccl issue #1189's 2x2 H20 log
  with its ``#  Rank`` lines left out, as a log pasted from below its header reads.

Sources: tests/fixtures/public/SOURCES.md. Each is also read cut at random offsets and as
UTF-16, and through ``python -m gpulane parse``.
"""

# The v2.13 table below is printed with the C printf formats nccl-tests uses, verbatim.
# ruff: noqa: UP031
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.collectives.nccl_tests.importer import stream_rows
from gpulane.collectives.nccl_tests.text import parse_text
from gpulane.errors import ParseError
from gpulane.record import Row
from tests.collectives.nccl_tests.common import FIXTURES, data_lines

BLANK_REDOP = (
    FIXTURES / "public" / "nccl-tests" / "msccl48_16xA100_alltoall_OLDFMT_blank_redop_EXCERPT.txt"
)
H20 = (
    FIXTURES / "public" / "nccl-info" / "nccl1189_2node_2xH20_alltoall_cumem_ib_gdrdma_EXCERPTS.txt"
)


def _rows(path: Path) -> list[Row]:
    return list(stream_rows(str(path), build="b"))


def test_blank_redop_lines_read_whole_as_printed() -> None:
    (run,) = parse_text(BLANK_REDOP.read_text(), str(BLANK_REDOP))
    assert run.columns is not None and "redop" in run.columns.pre
    printed = data_lines(BLANK_REDOP.read_text())
    assert len(run.lines) == len(printed) == 7
    for line, toks in zip(run.lines, printed, strict=True):
        # size count type, then time algbw busbw error twice: 11 tokens, no redop
        assert len(toks) == 11
        assert line.complete and line.redop is None and line.dtype == "float"
        assert line.size_bytes == int(toks[0]) and line.count == int(toks[1])
        out, inp = line.results
        assert [out.text["time"], out.text["algbw"], out.text["busbw"]] == toks[3:6]
        assert [inp.text["time"], inp.text["algbw"], inp.text["busbw"]] == toks[7:10]
    # No line is "cut off": the one error is the excerpt's missing footer.
    assert [e.kind for e in run.errors] == ["cut_off"]
    assert "Out of bounds" in run.errors[0].message


def test_blank_redop_rows_keep_every_measurement() -> None:
    rows = _rows(BLANK_REDOP)
    measured = [r for r in rows if r.time_us is not None]
    assert len(measured) == 14
    assert {r.op for r in measured} == {"alltoall"}
    # The in-place column printed error 1e+00 on every line (msccl's fork): failed checks.
    assert all(r.status == "ok" for r in measured if not r.in_place)
    assert all(r.status == "error" for r in measured if r.in_place)
    cut = [r for r in rows if r.time_us is None]
    assert len(cut) == 1 and "cut off" in (cut[0].error or "")


def test_blank_redop_cli_exit_zero() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpulane", "parse", "nccl-tests", str(BLANK_REDOP)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "stops before its out-of-place result" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_world_size_from_nccl_info_when_the_header_lists_no_devices(tmp_path: Path) -> None:
    text = H20.read_text()
    assert "nranks 4" in text
    whole = {r.world_size for r in _rows(H20)}
    assert whole == {4}  # the header's device list and NCCL agree
    headless = tmp_path / "h20_no_device_list.txt"
    headless.write_text("".join(ln for ln in text.splitlines(True) if "#  Rank" not in ln))
    (run,) = parse_text(headless.read_text(), str(headless))
    assert not run.header.ranks and run.header.world_size() is None
    assert run.world_size == 4
    assert {r.world_size for r in _rows(headless)} == {4}


def test_no_world_size_when_nccl_names_communicators_of_two_sizes(tmp_path: Path) -> None:
    lines = [ln for ln in H20.read_text().splitlines(True) if "#  Rank" not in ln]
    # The same processes' Init lines again for a second communicator of 2 ranks (another
    # address and commId): which one is the test's? Neither is taken.
    second = [
        ln.replace("comm 0x", "comm 0xdead").replace("commId 0x", "commId 0xbeef")
        .replace("nranks 4", "nranks 2")
        for ln in lines
        if "Init COMPLETE" in ln
    ]  # fmt: skip
    assert len(second) == 4
    path = tmp_path / "two_sizes.txt"
    path.write_text("".join(lines + second))
    (run,) = parse_text(path.read_text(), str(path))
    assert run.world_size is None


_CODECS = ("utf-8", "utf-16", "utf-16-le")


def _read(path: Path) -> list[Row] | None:
    try:
        return list(stream_rows(str(path), build="b"))
    except ParseError as err:
        assert str(path) in str(err)
        return None


def test_utf16_copy_reads_as_the_original(tmp_path: Path) -> None:
    copy = tmp_path / BLANK_REDOP.name
    copy.write_bytes(BLANK_REDOP.read_text().encode("utf-16"))
    key = [(r.size_bytes, r.in_place, r.time_us, r.status) for r in _rows(BLANK_REDOP)]
    assert [(r.size_bytes, r.in_place, r.time_us, r.status) for r in _rows(copy)] == key


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_CODECS), st.data())
def test_blank_redop_log_cut_anywhere_keeps_the_rows_before_the_cut(
    codec: str, data: st.DataObject
) -> None:
    blob = BLANK_REDOP.read_text().encode(codec)
    cut = data.draw(st.integers(1, len(blob) - 1), label="cut")
    whole = {(r.extra.get("line"), r.in_place): r for r in _rows(BLANK_REDOP) if r.time_us}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / BLANK_REDOP.name
        path.write_bytes(blob[:cut])
        rows = _read(path)
    if rows is None:
        return  # reported: the cut file reads as nothing
    measured = [r for r in rows if r.time_us is not None]
    for row in measured:
        same = whole[(row.extra.get("line"), row.in_place)]
        assert (row.size_bytes, row.time_us, row.busbw_gbps) == (
            same.size_bytes,
            same.time_us,
            same.busbw_gbps,
        )
    errors = [r for r in rows if r.time_us is None]
    assert len(errors) == 1 and errors[0].error  # one error: where it stops


def _v213_table(lines: list[list[str]], root: int) -> str:
    """A complete table as nccl-tests v2.13.0 prints one for a collective that reduces
    nothing (src/common.cu @ 51af557: header lines 923-926, each line 577 with opName ""
    and then 533 per placement, footer 997-998), filled with the excerpt's figures."""
    out = [
        "#\n",
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n"
        % ("", "", "", "", ""),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n"
        % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
           "time", "algbw", "busbw", "#wrong"),
    ]  # fmt: skip
    for toks in lines:
        size, count, _type, t1, a1, b1, _e1, t2, a2, b2, _e2 = toks
        row = "%12li  %12li  %8s  %6s  %6s" % (int(size), int(count), "float", "", "%6i" % root)
        for t, a, b in ((t1, a1, b1), (t2, a2, b2)):
            row += "  %7s  %6.2f  %6.2f  %5g" % (t, float(a), float(b), 0.0)
        out.append(row + "\n")
    out += ["# Out of bounds values : 0 OK\n", "# Avg bus bandwidth    : 2.04 \n", "#\n"]
    return "".join(out)


def test_v213_blank_redop_table_with_root_imports_whole(tmp_path: Path) -> None:
    printed = data_lines(BLANK_REDOP.read_text())
    for root in (-1, 0):  # alltoall prints root -1; broadcast/gather/scatter the root
        path = tmp_path / f"alltoall_perf_root{root}.txt"
        path.write_text(_v213_table(printed, root))
        (run,) = parse_text(path.read_text(), str(path))
        assert run.columns is not None and run.columns.pre[3:] == ["redop", "root"]
        assert not run.errors and run.finished
        assert [ln.root for ln in run.lines] == [root] * len(printed)
        assert all(ln.complete and ln.redop is None for ln in run.lines)
        rows = _rows(path)
        assert len(rows) == 2 * len(printed) and all(r.status == "ok" for r in rows)
    done = subprocess.run(
        [sys.executable, "-m", "gpulane", "parse", "nccl-tests", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
