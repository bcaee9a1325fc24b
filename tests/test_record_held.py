"""RowWriter without sync holds row lines and writes them a block at a time: the file
must read as if each line had been written when it came."""

from __future__ import annotations

import json

from gpulane.record import _HELD_LINES, RowWriter


def _lines(path):
    return [json.loads(raw) for raw in path.read_text().splitlines()]


def test_held_lines_are_all_written_at_close_in_order(tmp_path):
    n = _HELD_LINES * 2 + 3  # two whole blocks and a part of one
    with RowWriter(tmp_path, sync=False) as w:
        for k in range(n):
            w.write_line({"@facts": 0, "extra": {"line": k}})
    got = _lines(tmp_path / "rows.jsonl")
    assert [g["extra"]["line"] for g in got] == list(range(n))
    assert (tmp_path / "rows.jsonl").read_text().endswith("}\n")


def test_a_whole_row_after_held_lines_comes_after_them(tmp_path):
    with RowWriter(tmp_path, sync=False) as w:
        w.write_line({"@facts": 0, "extra": {"line": 1}})
        w.write({"run_id": "r", "status": "error", "error": "late"})
        w.write_line({"@facts": 0, "extra": {"line": 2}})
    got = _lines(tmp_path / "rows.jsonl")
    assert [g.get("extra", {}).get("line", g.get("error")) for g in got] == [1, "late", 2]


def test_sync_writer_writes_each_line_at_once(tmp_path):
    w = RowWriter(tmp_path, sync=True)
    try:
        w.write_line({"@facts": 0, "extra": {"line": 7}})
        w._fh.flush()
        assert _lines(tmp_path / "rows.jsonl") == [{"@facts": 0, "extra": {"line": 7}}]
    finally:
        w.close()


def test_a_held_line_is_the_text_the_line_encoder_gives(tmp_path):
    from pathlib import PurePosixPath

    from gpulane.record import _ENCODE_LINE

    line = {"@facts": 3, "time_us": 1.5, "busbw_gbps": float("inf"), "path": PurePosixPath("/x")}
    line["extra"] = {"line": 9, "note": 'é"'}
    with RowWriter(tmp_path, sync=False) as w:
        w.write_line(line)
    assert (tmp_path / "rows.jsonl").read_text() == _ENCODE_LINE(line) + "\n"
    assert '"path":"/x"' in _ENCODE_LINE(line)  # default=str, as rows.jsonl had it
