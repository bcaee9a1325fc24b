from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulane import parquet_rows
from gpulane.collectives.nccl_tests.logs import rows_from_file
from gpulane.parquet_rows import ParquetRows, read_parquet, write_parquet
from gpulane.record import FIELDS, Row, RowWriter, SharedText, new_run_id, read_rows
from tests.conftest import fixture_path


def _row(i: int) -> Row:
    return Row(
        run_id="r1",
        kind="collective",
        backend="torch-gloo",
        op="all_reduce",
        size_bytes=8 << i,
        time_us=1.0 + i,
        env={"NCCL_ALGO": "Ring"} if i else {},
        versions={"torch": "2.13"},
    )


def test_design_fields_present() -> None:
    design = [
        "run_id",
        "started_at",
        "build",
        "kind",
        "backend",
        "op",
        "nodes",
        "world_size",
        "dtype",
        "redop",
        "root",
        "in_place",
        "size_bytes",
        "count",
        "time_us",
        "time_us_p50",
        "time_us_p99",
        "algbw_gbps",
        "busbw_gbps",
        "wrong",
        "path",
        "env",
        "versions",
        "status",
        "error",
    ]
    assert set(design) <= set(FIELDS)


def test_rows_append_and_survive_a_cut_off_line(tmp_path: Path) -> None:
    with RowWriter(tmp_path) as w:
        for i in range(3):
            w.write(_row(i))
    # A crash mid-write leaves half a line; the complete rows still read.
    with open(tmp_path / "rows.jsonl", "a") as fh:
        fh.write('{"run_id": "r1", "kind": "coll')
    rows = list(read_rows(tmp_path))
    assert [r.size_bytes for r in rows] == [8, 16, 32]
    assert rows[1].env == {"NCCL_ALGO": "Ring"}


def test_parquet_round_trip(tmp_path: Path) -> None:
    with RowWriter(tmp_path) as w:
        for i in range(3):
            w.write(_row(i))
    out = write_parquet(tmp_path)
    assert out is not None and out.name == "rows.parquet"
    frame = read_parquet(out)
    assert list(frame["size_bytes"]) == [8, 16, 32]
    assert frame["env"][1] == {"NCCL_ALGO": "Ring"}
    assert set(FIELDS) <= set(frame.columns)


def test_unknown_keys_kept_in_extra() -> None:
    data = _row(0).to_dict()
    data["something_new"] = 5
    row = Row.from_dict(data)
    assert row.extra["something_new"] == 5
    json.dumps(row.to_dict())


def test_run_ids_unique() -> None:
    assert len({new_run_id("b") for _ in range(50)}) == 50


def test_parquet_written_in_batches_keeps_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory is one batch of rows, whatever the file's size; types follow the rows."""
    monkeypatch.setattr(parquet_rows, "PARQUET_BATCH", 2)
    with RowWriter(tmp_path, sync=False) as w:
        for i in range(5):
            row = _row(i).to_dict()
            row["size_bytes"] = None if i == 0 else row["size_bytes"]  # null in the first batch
            row["note"] = i if i < 3 else "five"  # a key that is no Row field, mixed types
            w.write(row)
    frame = read_parquet(write_parquet(tmp_path))
    assert frame["size_bytes"].isna().tolist() == [True, False, False, False, False]
    assert list(frame["size_bytes"][1:]) == [16, 32, 64, 128]
    assert list(frame["note"]) == ["0", "1", "2", "five", "five"]
    assert frame["env"][1] == {"NCCL_ALGO": "Ring"} and frame["path"].isna().all()
    assert list(frame.columns[: len(FIELDS)]) == list(FIELDS)


def test_parquet_in_batches_joins_their_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three rows a batch: a column null in the first batch and numbers later, ints that
    # meet floats, and a key that only a later row has.
    monkeypatch.setattr(parquet_rows, "PARQUET_BATCH", 3)
    rows = [_row(i).to_dict() for i in range(8)]
    for i, row in enumerate(rows):
        row["time_us"] = None if i < 3 else 1.5 * i
        row["wrong"] = None if i < 4 else i
        row["world_size"] = 2 if i < 3 else None
    rows[6]["late_key"] = "x"
    with RowWriter(tmp_path) as w:
        for row in rows:
            w.write(row)
    write_parquet(tmp_path)
    frame = read_parquet(tmp_path / "rows.parquet")
    assert len(frame) == 8 and frame["time_us"].dtype == "float64"
    assert frame["time_us"].isna().tolist() == [True] * 3 + [False] * 5
    assert list(frame["time_us"][3:]) == [1.5 * i for i in range(3, 8)]
    assert list(frame["wrong"][4:]) == [4, 5, 6, 7] and frame["wrong"][:4].isna().all()
    assert list(frame["world_size"][:3]) == [2, 2, 2] and frame["world_size"][3:].isna().all()
    assert frame["late_key"].isna().tolist() == [True] * 6 + [False, True]
    assert frame["late_key"][6] == "x"
    assert frame["env"][1] == {"NCCL_ALGO": "Ring"}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # parts removed


def test_parquet_of_no_rows(tmp_path: Path) -> None:
    assert ParquetRows(tmp_path).close() is None
    assert not list(tmp_path.iterdir())


def test_shared_text_is_the_plain_encoding() -> None:
    # Real rows whose extra holds the same facts object per run (five runs in one log).
    rows = rows_from_file(
        fixture_path("public/nccl-tests/wohlbier_dgx2_5tests_concatenated_log.txt")
    )
    plain = json.JSONEncoder(default=str).encode
    ordered = json.JSONEncoder(default=str, sort_keys=True).encode
    whole, extra = SharedText(plain, ("env", "versions", "extra")), SharedText(ordered)
    for row in rows:
        data = {name: getattr(row, name) for name in FIELDS}
        assert whole(data) == plain(data)
        assert extra(row.extra) == ordered(row.extra)
    # A shared dict that gives way to another object is encoded anew.
    facts = {"a": 1}
    assert extra({"f": facts}) == extra({"f": facts}) == '{"f": {"a": 1}}'
    assert extra({"f": {"a": 2}}) == '{"f": {"a": 2}}'


def test_imported_rows_are_written_as_synced_ones(tmp_path: Path) -> None:
    rows = rows_from_file(fixture_path("h200x2/nccl-tests-all_reduce.txt"))
    for sync in (True, False):
        with RowWriter(tmp_path / str(sync), sync=sync) as w:
            for row in rows:
                w.write(row)
    synced = (tmp_path / "True" / "rows.jsonl").read_text()
    assert (tmp_path / "False" / "rows.jsonl").read_text() == synced
    assert [json.loads(line) for line in synced.splitlines()] == [r.to_dict() for r in rows]
