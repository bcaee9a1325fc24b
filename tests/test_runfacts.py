"""A run's facts stored once (facts.jsonl) and joined when rows are read back: the same
rows come back, whatever differs from row to row."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.parquet_rows import ParquetRows, read_parquet
from gpulane.record import Row, RowWriter, own_rows_writer, read_rows, row_values, run_facts
from gpulane.session.live import RowTail


def _rows() -> list[Row]:
    """Rows of two runs sharing nested facts, with values that change from row to row
    (None after a value, True after 1, a scalar extra key coming and going)."""
    facts_a = {"ranks": [{"rank": 0, "host": "a"}, {"rank": 1, "host": "b"}], "test_index": 0}
    facts_b = {"ranks": [{"rank": 0, "host": "c"}], "test_index": 1}
    env = {"NCCL_ALGO": "Ring"}
    rows = []
    for k in range(6):
        facts = facts_a if k < 4 else facts_b
        extra: dict[str, object] = {"line": 10 + k, "nccl_tests": facts}
        if k == 2:
            extra["max_error"] = 1e-7
        rows.append(
            Row(
                run_id="r1",
                kind="collective",
                backend="nccl-tests",
                op="all_reduce" if k < 4 else "broadcast",
                started_at="2026-11-27T06:00:00+00:00",
                build="b",
                world_size=2 if k < 4 else 1,
                size_bytes=8 << k,
                in_place=bool(k % 2),
                time_us=None if k == 3 else 1.5 + k,
                wrong=1 if k == 1 else 0,
                root=True if k == 5 else 1,  # the type must survive
                env=env,
                extra=extra,
                status="error" if k == 1 else "ok",
            )
        )
    rows.append(Row(run_id="r1", kind="collective", backend="nccl-tests", op="x", env=env))
    return rows


def test_rows_come_back_whole_and_facts_are_stored_once(tmp_path: Path) -> None:
    rows = _rows()
    with RowWriter(tmp_path, sync=False, facts=run_facts(tmp_path)) as w:
        for row in rows:
            w.write(row)
    back = list(read_rows(tmp_path / "rows.jsonl"))
    assert back == rows
    assert type(back[5].root) is bool and type(back[4].root) is int
    assert "max_error" not in back[3].extra and back[2].extra["max_error"] == 1e-7
    facts = (tmp_path / "facts.jsonl").read_text().splitlines()
    assert len(facts) == 3  # run a, run b, the row without nested facts
    assert "ranks" not in (tmp_path / "rows.jsonl").read_text()


def test_parquet_rows_are_joined_with_the_same_facts(tmp_path: Path) -> None:
    rows = _rows()
    facts = run_facts(tmp_path)
    sink = ParquetRows(tmp_path)
    with RowWriter(tmp_path, sync=False, facts=facts) as w:
        for row in rows:
            base, line = facts.line(row_values(row))
            w.write_line(line)
            sink.add_line(base, line)
    sink.close()
    frame = read_parquet(tmp_path / "rows.parquet")
    assert "@facts" not in frame.columns
    assert list(frame["extra"]) == [r.extra for r in rows]
    assert list(frame["op"]) == [r.op for r in rows]


def test_a_row_whose_facts_are_gone_is_skipped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows()
    with RowWriter(tmp_path, sync=False, facts=run_facts(tmp_path)) as w:
        for row in rows:
            w.write(row)
    lines = (tmp_path / "facts.jsonl").read_text().splitlines()
    (tmp_path / "facts.jsonl").write_text(lines[0] + "\n")  # run b's facts lost
    back = list(read_rows(tmp_path / "rows.jsonl"))
    assert back == rows[:4]
    assert "skipped 3 unreadable lines (5, 6, 7)" in capsys.readouterr().err


def _sweep_rows(run_id: str, nccl_version: str, n: int) -> list[Row]:
    """Rows as a GPU sweep's leading rank makes them: each with its own copy of the run's
    versions, env and NCCL summary (equal values, new objects), and its own point."""
    rows = []
    for k in range(n):
        nccl = {"transport": "P2P/CUMEM", "channels": 24, "lines": [f"ring {c}" for c in range(8)]}
        rows.append(
            Row(
                run_id=run_id,
                kind="collective",
                backend="nccl",
                op="all_reduce",
                build="nvlink",
                world_size=2,
                size_bytes=8 << k,
                time_us=5.0 + k,
                env={"NCCL_NVLS_ENABLE": "0"},
                versions={"gpulane": "0.1.0", "nccl": nccl_version},
                transport="P2P/CUMEM",
                extra={"requested_bytes": 8 << k, "nccl": nccl, "hosts": ["gpu-a"]},
            )
        )
    return rows


def test_own_runs_store_their_facts_once(tmp_path: Path) -> None:
    rows = _sweep_rows("r1", "2.28.9", 12)
    with own_rows_writer(tmp_path) as w:
        for row in rows:
            w.write(row)
    text = (tmp_path / "rows.jsonl").read_text()
    # no per-run fact on a row's line: versions, env, NCCL's summary and hosts are in facts
    for fact in ("versions", "NCCL_NVLS_ENABLE", "P2P/CUMEM", "ring 0", "gpu-a", "nvlink"):
        assert fact not in text
    assert len((tmp_path / "facts.jsonl").read_text().splitlines()) == 1
    assert list(read_rows(tmp_path / "rows.jsonl")) == rows
    assert len(text) / len(rows) < 200  # bytes a row: its point only


def test_a_resumed_run_numbers_its_facts_on(tmp_path: Path) -> None:
    first, second = _sweep_rows("r1", "2.28.9", 3), _sweep_rows("r1", "2.29.2", 2)
    with own_rows_writer(tmp_path) as w:
        for row in first:
            w.write(row)
    # the session's error row beside them, written whole
    with RowWriter(tmp_path) as w:
        w.write(Row("r1", "collective", "nccl", "all_reduce", status="error", error="rank 1 died"))
    with own_rows_writer(tmp_path) as w:
        for row in second:
            w.write(row)
    back = list(read_rows(tmp_path / "rows.jsonl"))
    assert [r.versions.get("nccl") for r in back] == ["2.28.9"] * 3 + [None] + ["2.29.2"] * 2
    assert back[3].error == "rank 1 died"
    assert back[:3] == first and back[4:] == second


def test_the_live_table_reads_rows_with_their_facts(tmp_path: Path) -> None:
    rows = _sweep_rows("r1", "2.28.9", 4)
    tail = RowTail(tmp_path / "rows.jsonl")
    with own_rows_writer(tmp_path) as w:
        w.write(rows[0])
        assert tail.read() == rows[:1]
        for row in rows[1:]:
            w.write(row)
        assert tail.read() == rows[1:]


def test_rows_coming_back_to_earlier_facts_name_them_again(tmp_path: Path) -> None:
    """A tokens run alternates prefill and decode rows, each with its own nested values:
    the run's facts are written once per op, the per-row dict stays on its row."""
    rows = []
    for k in range(8):
        (row,) = _sweep_rows("r1", "2.28.9", 1)
        row.op = "prefill" if k % 2 == 0 else "decode"
        row.extra["roofline"] = {"ms": 1.0 + k}
        rows.append(row)
    with own_rows_writer(tmp_path) as w:
        for row in rows:
            w.write(row)
    assert len((tmp_path / "facts.jsonl").read_text().splitlines()) == 2
    assert list(read_rows(tmp_path / "rows.jsonl")) == rows
    assert '"roofline"' in (tmp_path / "rows.jsonl").read_text()
