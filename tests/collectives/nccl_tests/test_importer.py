"""`gpulane parse nccl-tests` and the importer contract (WHAT, OPTIONS, stream_rows, render),
on the real captured logs in tests/fixtures and logs made from their lines."""

from __future__ import annotations

import io
import json
import types
from pathlib import Path

import pytest
from rich.console import Console

from gpulane.collectives.nccl_tests import importer
from gpulane.collectives.nccl_tests.logs import rows_from_file
from gpulane.commands.parse import main as front
from gpulane.errors import InputError, ParseError
from gpulane.parquet_rows import read_parquet
from gpulane.record import Row, read_rows
from tests.collectives.nccl_tests.common import MPI_REAL, data_lines, errors, measured
from tests.conftest import fixture_path
from tests.helpers import gpulane


def parse_main(argv: list[str]) -> int:
    """`gpulane parse nccl-tests ARGS`, through the one front every format goes through."""
    return front(["nccl-tests", *argv])


# nccl-tests' CUDACHECK line when the first CUDA call fails (before any header is printed),
# under mpirun: rank 0's failure, TESTCHECK's stack line, then Open MPI's abort banners.
FAILED_BEFORE_HEADER = (
    "vm: Test CUDA failure common.cu:1030 'system not yet initialized'\n"
    " .. vm pid 1553: Test failure common.cu:1127\n"
    "--------------------------------------------------------------------------\n"
    "Primary job  terminated normally, but 1 process returned\n"
    "a non-zero exit code. Per user-direction, the job has been aborted.\n"
    "--------------------------------------------------------------------------\n"
    "--------------------------------------------------------------------------\n"
    "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
    "the job to be terminated. The first process to do so was:\n"
    "\n"
    "  Process name: [[41525,1],0]\n"
    "  Exit code:    2\n"
    "--------------------------------------------------------------------------\n"
)


def _plain(row: Row) -> dict[str, object]:
    data = row.to_dict()
    data.pop("started_at")
    return data


def test_contract_names() -> None:
    assert isinstance(importer.WHAT, str) and "nccl-tests" in importer.WHAT
    assert importer.OPTIONS == {"op": "collective, where the log does not name it"}
    rows = importer.stream_rows(
        str(fixture_path("h200x2/nccl-tests-broadcast.txt")), run_id=None, build=None
    )
    assert isinstance(rows, types.GeneratorType)  # read as it is consumed
    first = next(rows)
    assert first.op == "broadcast" and first.size_bytes == 8 and first.time_us == 13.15


def test_stream_rows_checks_options_before_reading(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such.log")
    with pytest.raises(InputError, match=r"unknown option 'foo'"):
        importer.stream_rows(missing, run_id=None, build=None, foo="1")
    with pytest.raises(InputError, match=r"^--op: "):
        importer.stream_rows(missing, run_id=None, build=None, op="all_reduse")
    with pytest.raises(ParseError, match=r"no-such\.log: cannot read"):
        next(importer.stream_rows(missing, run_id=None, build=None))


@pytest.mark.parametrize(
    "name", ["all_reduce", "all_gather", "broadcast", "reduce_scatter", "mpi-all_reduce"]
)
def test_render_prints_the_table_as_nccl_tests_did(name: str) -> None:
    path = fixture_path(f"h200x2/nccl-tests-{name}.txt")
    out = io.StringIO()
    importer.render(
        importer.stream_rows(str(path), run_id=None, build=None), Console(file=out, width=200)
    )
    printed = out.getvalue()
    # Every table line, token for token, as nccl-tests printed it.
    assert data_lines(printed) == data_lines(path.read_text())
    text = path.read_text()
    for line in ("# Out of bounds values : 0 OK", "# Collective test starting: "):
        assert line in printed and line in text
    avg = next(ln for ln in text.splitlines() if ln.startswith("# Avg bus bandwidth"))
    assert avg.strip() in printed
    ranks = [ln.split() for ln in text.splitlines() if ln.startswith("#  Rank")]
    assert [ln.split() for ln in printed.splitlines() if ln.startswith("#  Rank")] == ranks


def test_utf16_logs_keep_their_header(tmp_path: Path) -> None:
    path = fixture_path("h200x2/nccl-tests-all_reduce.txt")
    want = [_plain(r) for r in rows_from_file(path)]
    assert want[0]["versions"]["nccl_tests"] == "2.19.6"  # type: ignore[index]
    for codec in ("utf-16", "utf-16-le", "utf-16-be"):  # with a byte-order mark, without
        copy = tmp_path / codec / path.name
        copy.parent.mkdir()
        copy.write_bytes(path.read_text().encode(codec))
        got = [_plain(r) for r in rows_from_file(copy)]
        for row in got:
            row["source"] = str(path)
        assert got == want, codec
        facts = got[0]["extra"]["nccl_tests"]  # type: ignore[index]
        assert facts["test"] == "all_reduce_perf" and facts["op_source"] == "header"


def test_failure_before_any_header_keeps_its_message(tmp_path: Path) -> None:
    log = tmp_path / "all_reduce.log"
    log.write_text(FAILED_BEFORE_HEADER)
    rows = list(importer.stream_rows(str(log), run_id=None, build=None))
    assert not measured(rows)
    cuda, abort = errors(rows)
    assert cuda.error == (
        f"{log}:1: all_reduce_perf failed: Test CUDA failure common.cu:1030 on vm: "
        "'system not yet initialized' [Test failure common.cu:1127 (pid 1553 on vm)]"
    )
    assert cuda.op == "all_reduce" and cuda.extra["event"] == "cuda"
    assert abort.error is not None and abort.error.startswith(f"{log}:4: all_reduce_perf aborted")
    assert "mpirun detected" in abort.error


def test_failure_before_a_header_goes_with_the_run_that_follows(tmp_path: Path) -> None:
    # Another rank fails while rank 0 prints its header: the failure belongs to that run.
    log = tmp_path / "mixed.log"
    log.write_text(FAILED_BEFORE_HEADER.splitlines(keepends=True)[0] + MPI_REAL)
    rows = list(importer.stream_rows(str(log), run_id=None, build=None))
    assert len(measured(rows)) == 48
    (err,) = errors(rows)
    assert "'system not yet initialized'" in (err.error or "") and err.world_size == 2


def test_exit_status_1_when_every_run_failed(tmp_path: Path) -> None:
    failed = tmp_path / "failed.log"
    failed.write_text(FAILED_BEFORE_HEADER)
    good = fixture_path("h200x2/nccl-tests-all_reduce.txt")
    proc = gpulane("parse", "nccl-tests", str(failed), "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert f"nothing measured in {failed} (every run in it failed)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stdout.splitlines()) == 2  # the two error rows
    assert gpulane("parse", "nccl-tests", str(good), "--json", cwd=tmp_path).returncode == 0
    # One good log and one failed: 1, naming the failed one.
    proc = gpulane("parse", "nccl-tests", str(good), str(failed), "--json", cwd=tmp_path)
    assert proc.returncode == 1 and str(failed) in proc.stderr
    helptext = gpulane("parse", "nccl-tests", "--help", cwd=tmp_path).stdout
    assert "1 when every run in a FILE failed" in " ".join(helptext.split())


def test_out_dir_is_checked_before_reading(tmp_path: Path) -> None:
    missing = str(tmp_path / "not-read.log")
    used = tmp_path / "used"
    used.mkdir()
    (used / "rows.jsonl").write_text("{}\n")
    proc = gpulane("parse", "nccl-tests", missing, "--out", str(used), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"gpulane: error: --out {used}: already holds rows.jsonl; give a new directory (rows of different parses are not mixed)\n"
    )
    afile = tmp_path / "afile"
    afile.write_text("x")
    for bad, what in ((afile, "not a directory"), (afile / "sub", "cannot write there")):
        proc = gpulane("parse", "nccl-tests", missing, "--out", str(bad), cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.startswith(f"gpulane: error: --out {bad}: ")
        assert what in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_out_dir_rows_and_parquet(tmp_path: Path) -> None:
    out = tmp_path / "rows"
    path = fixture_path("public/nccl-tests/wohlbier_dgx2_5tests_concatenated_log.txt")
    assert parse_main([str(path), "--out", str(out), "--json"]) == 0
    lines = (out / "rows.jsonl").read_text().splitlines()
    assert len(lines) == 5 * 62
    rows = list(read_rows(out / "rows.jsonl"))  # joined with the run's facts again
    frame = read_parquet(out / "rows.parquet")
    assert len(frame) == len(rows) and list(frame["size_bytes"]) == [r.size_bytes for r in rows]
    assert frame["extra"][0]["nccl_tests"]["test_index"] == 0
    assert [r.extra["nccl_tests"]["test_index"] for r in rows[::62]] == [0, 1, 2, 3, 4]
    assert list(frame["extra"]) == [r.extra for r in rows]
    # The facts of each test once, not on every line.
    assert len((out / "facts.jsonl").read_text().splitlines()) == 5
    assert all("nccl_tests" not in ln for ln in lines)
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no part files left


# ----------------------------------------------------------------------------- CLI


def test_cli_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    path = fixture_path("h200x2/nccl-tests-broadcast.txt")
    assert parse_main([str(path), "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 62
    first = json.loads(lines[0])
    assert first["op"] == "broadcast" and first["time_us"] == 13.15 and first["root"] == 0


def test_cli_table_and_out_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = fixture_path("public/nccl-tests/wohlbier_dgx2_12xV100_all_gather_OLDFMT_FAILED.txt")
    b = fixture_path("h200x2/nccl-tests-all_reduce.json")
    out = tmp_path / "rows"
    assert parse_main([str(a), str(b), "--out", str(out), "--build", "dgx2"]) == 0
    captured = capsys.readouterr()
    assert "seville" in captured.out and "Tesla V100-SXM3-32GB" in captured.out
    assert "Out of bounds values : 4 FAILED" in captured.out
    assert "Avg bus bandwidth    : 30.2993" in captured.out
    assert "4 of 124 rows are errors" in captured.err
    frame = read_parquet(out / "rows.parquet")
    assert len(frame) == 124 and set(frame["build"]) == {"dgx2"}
    assert (out / "rows.jsonl").read_text().count("\n") == 124


def test_cli_reports_parse_errors_as_one_line(tmp_path: Path) -> None:
    from tests.helpers import gpulane

    bad = tmp_path / "not.txt"
    bad.write_text("hello\n")
    proc = gpulane("parse", "nccl-tests", str(bad), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"gpulane: error: {bad}: not nccl-tests output")
    assert "Traceback" not in proc.stderr
