"""Lines tagged by the launcher (issue 43): ``mpirun --tag-output`` puts ``[1,0]<stdout>:``
before each line, ``srun -l`` puts ``0: ``. The real tagged log must read as the same log
untagged would: every row, the same numbers, exit 0."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.collectives.nccl_tests.importer import stream_rows
from gpulane.collectives.nccl_tests.text import strip_launcher_tag
from gpulane.errors import ParseError
from gpulane.record import Row
from tests.collectives.nccl_tests.common import FIXTURES

TAGGED = (
    FIXTURES / "public" / "nccl-tests-tagged" / "nccl_ebpf_2x5090_all_reduce_mpirun_tag_output.txt"
)
MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:", re.M)


def _measured(path: Path) -> list[tuple[object, ...]]:
    rows = list(stream_rows(str(path), build="b"))
    return [(r.size_bytes, r.in_place, r.time_us, r.busbw_gbps, r.error) for r in rows]


def _untagged(tmp_path: Path, prefix: str) -> Path:
    out = tmp_path / f"{prefix.strip() or 'none'}.txt"
    text = TAGGED.read_text()
    out.write_text(MPI_TAG.sub(prefix, text))
    return out


def test_fixture_is_tagged_on_every_output_line() -> None:
    lines = [ln for ln in TAGGED.read_text().splitlines() if ln.startswith("[")]
    assert len(lines) == 29 and all(MPI_TAG.match(ln) for ln in lines)


@pytest.mark.parametrize("prefix", ["", "0: "])
def test_tagged_log_reads_as_the_untagged_one(tmp_path: Path, prefix: str) -> None:
    plain = _measured(_untagged(tmp_path, ""))
    assert len(plain) == 16  # 8 sizes, out-of-place and in-place
    assert all(row[-1] is None for row in plain)
    assert _measured(TAGGED) == plain
    assert _measured(_untagged(tmp_path, prefix)) == plain


def test_size_and_bus_bandwidth_of_the_last_row() -> None:
    rows = list(stream_rows(str(TAGGED), build="b"))
    last = [r for r in rows if r.size_bytes == 134217728]
    assert sorted(r.busbw_gbps for r in last) == [2.30, 2.31]


def test_cli_exit_zero_on_the_tagged_log() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpulane", "parse", "nccl-tests", str(TAGGED)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "58458.9" in done.stdout


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("[1,12]<stdout>:#  Rank  1 Group", "#  Rank  1 Group"),
        ("[1,0]<stderr>:NCCL WARN x", "NCCL WARN x"),
        ("3: #       size", "#       size"),
        ("     1048576        262144     float", "     1048576        262144     float"),
        ("node0:21:21 [0] NCCL INFO", "node0:21:21 [0] NCCL INFO"),
        ("0:21:21 [0] NCCL INFO", "0:21:21 [0] NCCL INFO"),
    ],
)
def test_strip_launcher_tag(line: str, want: str) -> None:
    assert strip_launcher_tag(line) == want


_CODECS = ("utf-8", "utf-16", "utf-16-le")


def _read(path: Path) -> list[Row] | None:
    try:
        return list(stream_rows(str(path), build="b"))
    except ParseError as err:
        assert str(path) in str(err)
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_CODECS), st.data())
def test_tagged_log_cut_anywhere_keeps_its_rows_before_the_cut(
    codec: str, data: st.DataObject
) -> None:
    blob = TAGGED.read_text().encode(codec)
    cut = data.draw(st.integers(1, len(blob) - 1), label="cut")
    with tempfile.TemporaryDirectory() as tmp:
        whole_path = Path(tmp) / "whole" / TAGGED.name
        whole_path.parent.mkdir()
        whole_path.write_bytes(blob)
        whole = {(r.extra.get("line"), r.in_place): r for r in _read(whole_path) or []}
        path = Path(tmp) / TAGGED.name
        path.write_bytes(blob[:cut])
        rows = _read(path)
    assert len(whole) == 16
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
    if len(measured) < len(whole):
        errors = [r for r in rows if r.time_us is None]
        assert errors and all(r.error for r in errors)
