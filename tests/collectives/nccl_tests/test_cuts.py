"""Real nccl-tests logs cut at random byte offsets (as a killed run or a short copy leaves
them), in UTF-8 and re-encoded as UTF-16 with and without a byte-order mark.

Two properties, against the rows of the whole file:
- no number that is not in the file: every number of a row read from the cut file is the
  number of the same row (same run, table line and placement) of the whole file;
- every cut is reported: where the cut lost rows or summary figures, or any of a
  single-test log's content, the rows say so in an error row (or reading stops with a
  ParseError naming the file).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.collectives.nccl_tests.importer import stream_rows
from gpulane.errors import ParseError
from gpulane.record import Row
from tests.collectives.nccl_tests.common import ALL

CODECS = ("utf-8", "utf-16", "utf-16-le", "utf-16-be")
NUMBERS = (
    "size_bytes",
    "count",
    "root",
    "time_us",
    "time_us_p50",
    "time_us_p99",
    "algbw_gbps",
    "busbw_gbps",
    "wrong",
    "world_size",
    "nodes",
    "iters",
)
EXTRA_NUMBERS = ("i_min_us", "i_max_us", "i_cv_pct", "max_error")
SUMMARY = ("out_of_bounds", "avg_busbw_gbps")


def _rows(path: Path) -> list[Row] | None:
    try:
        return list(stream_rows(str(path), run_id=None, build="b"))
    except ParseError as err:
        assert str(path) in str(err)
        return None


@functools.cache
def _whole(original: Path, codec: str) -> tuple[list[Row], dict[tuple[Any, ...], Row]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / original.name
        path.write_bytes(original.read_text().encode(codec))
        rows = _rows(path)
    assert rows is not None
    return rows, {_key(r): r for r in rows if r.time_us is not None}


def _key(row: Row) -> tuple[Any, ...]:
    return (row.run_id, row.extra.get("line"), row.in_place)


def _facts(row: Row) -> dict[str, Any]:
    return row.extra.get("nccl_tests") or {}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL), st.sampled_from(CODECS), st.data())
def test_cut_logs_hold_no_foreign_number_and_say_where_they_stop(
    original: Path, codec: str, data: st.DataObject
) -> None:
    blob = original.read_text().encode(codec)
    cut = data.draw(st.integers(1, len(blob) - 1), label="cut")
    whole_rows, whole = _whole(original, codec)
    with tempfile.TemporaryDirectory() as tmp:
        # The same name, so that run ids (from the file name) match the whole file's.
        path = Path(tmp) / original.name
        path.write_bytes(blob[:cut])
        rows = _rows(path)
    if rows is None:
        return  # reported: the cut file reads as nothing

    # No number that the file does not hold.
    for row in rows:
        if row.time_us is None:  # an error row: its size is one of the run's sizes
            run = [r for r in whole_rows if r.run_id == row.run_id]
            if row.size_bytes is not None:
                assert row.size_bytes in {r.size_bytes for r in run}
            assert row.world_size in {None} | {r.world_size for r in run}
            continue
        same = whole.get(_key(row))
        assert same is not None, f"row {_key(row)} is not in the whole file"
        for name in NUMBERS:
            value = getattr(row, name)
            assert value is None or value == getattr(same, name), (name, value)
        for name in EXTRA_NUMBERS:
            value = row.extra.get(name)
            assert value is None or value == same.extra.get(name), (name, value)
        for name, value in row.versions.items():
            assert value == same.versions.get(name), (name, value)

    # Every cut is reported.
    reported = any(r.extra.get("event") in ("cut_off", "damaged") for r in rows)
    tail = blob[cut:].decode(codec, errors="ignore")
    single = "concatenated" not in original.name
    lost = single and tail.strip("#\n\r\t \ufeff") != ""
    for run_id in {r.run_id for r in rows}:
        got = [r for r in rows if r.run_id == run_id and r.time_us is not None]
        want = [r for r in whole_rows if r.run_id == run_id and r.time_us is not None]
        fewer = len(got) < len(want)
        summary_lost = got and any(
            k in _facts(want[-1]) and k not in _facts(got[-1]) for k in SUMMARY
        )
        lost = lost or fewer or bool(summary_lost)
    if lost:
        assert reported, f"cut at byte {cut} of {len(blob)} ({codec}) not reported"
