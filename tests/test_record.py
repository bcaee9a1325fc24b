from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulane.record import (
    FIELDS,
    Row,
    RowWriter,
    new_run_id,
    read_parquet,
    read_rows,
    write_parquet,
)


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
    assert [r["size_bytes"] for r in rows] == [8, 16, 32]
    assert rows[1]["env"] == {"NCCL_ALGO": "Ring"}


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
    import gpulane.record as record

    monkeypatch.setattr(record, "PARQUET_BATCH", 2)
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
