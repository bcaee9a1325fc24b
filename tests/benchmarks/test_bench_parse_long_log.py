"""benchmarks/parse/bench_parse.py's long nccl-tests log (one header, a table that goes on)
imported: the rows stay within three times the log (moved here from tests/test_runfacts.py:
the tests of gpulane do not import ``benchmarks``)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.parse.bench_parse import build_long_log
from gpulane.record import read_rows
from gpulane.session.imports import ImportRequest, import_files


def test_one_long_table_imports_in_at_most_three_times_its_size(tmp_path: Path) -> None:
    """The shape nccl-tests' -N cycles print: one header of 16 ranks and a table that goes
    on. Before, every row repeated the header and ranks (27 times the log)."""
    log = tmp_path / "long.log"
    build_long_log(log, 520_000)  # past one hand-over (4096 lines)
    out = tmp_path / "out"
    assert import_files(ImportRequest("nccl-tests", [str(log)], out=str(out))) == 0
    size = (out / "rows.jsonl").stat().st_size
    assert size <= 3 * log.stat().st_size, (size, log.stat().st_size)
    rows = list(read_rows(out / "rows.jsonl"))
    assert len(rows) > 4096 * 2  # more than one hand-over of the parser
    assert {len(r.extra["nccl_tests"]["ranks"]) for r in rows} == {16}
    facts = (out / "facts.jsonl").read_text().splitlines()
    assert len(facts) == 2  # the header; then with the summary read at the end
    last = json.loads(facts[-1])
    assert last["row"]["extra"]["nccl_tests"]["avg_busbw_gbps"] == 70.742
    assert rows[-1].extra["nccl_tests"]["avg_busbw_gbps"] == 70.742
