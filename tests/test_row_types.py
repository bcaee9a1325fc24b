"""Rows are typed end to end: once read back they are :class:`Row`, and the code that reads
them back (views, session, campaigns, accept, evidence, rules, reports) takes ``Row``.

The check reads the annotations (no import): a parameter named ``row``/``rows``/``rec``/
``recs`` (or ``*_row``/``*_rows``) typed as a dict or a Mapping, or a function named for
rows that returns dicts, is a dict row. ``python -m tests.test_row_types [DIR]`` prints
them and their count (issue 29 counted them before and after).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROW_NAME = re.compile(r"^(row|rows|rec|recs|\w+_rows?)$")
DICT_TYPE = re.compile(r"\b(dict|Dict|Mapping|MutableMapping)\[")
DICT_ROWS = re.compile(r"\b(list|Iterator|Iterable|Sequence)\[dict\[")

# Where rows are read back and used: these take Row and nothing else.
TYPED = [
    "gpulane/record.py",
    "gpulane/parquet_rows.py",
    "gpulane/rundir.py",
    "gpulane/session",
    "gpulane/collectives/table.py",
    "gpulane/collectives/nccl_tests/live.py",
    "gpulane/collectives/sweep.py",
    "gpulane/transfers/view.py",
    "gpulane/transfers/matrices.py",
    "gpulane/transfers/plot.py",
    "gpulane/inference/table.py",
    "gpulane/campaigns",
    "gpulane/topology/evidence",
    "gpulane/analysis/rules",
    "gpulane/analysis/doctor",
    "gpulane/analysis/reference",
    "gpulane/analysis/store.py",
    "gpulane/analysis/plots",
    "gpulane/analysis/report",
    "gpulane/analysis/export",
    "gpulane/analysis/compare",
]
# What writes rows takes what it is given to write (a Row, or a dict an importer or a
# test made), and the Parquet copy reads the lines as they are: not rows read back.
WRITE_SIDE = {
    "gpulane/record.py:row_values",
    "gpulane/record.py:write",
    "gpulane/parquet_rows.py:add",
    "gpulane/record.py:_row_dicts",
}


def dict_row_signatures(root: Path, paths: list[str] | None = None) -> list[str]:
    """``file:line name(params)`` of every function under ``root`` (or its ``paths``)
    that takes or returns dict rows."""
    files: list[Path] = []
    for p in paths if paths is not None else ["gpulane"]:
        target = root / p
        files += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    found = []
    for f in files:
        rel = f.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
            bad = [
                p.arg
                for p in params
                if p.annotation is not None
                and ROW_NAME.match(p.arg)
                and DICT_TYPE.search(ast.unparse(p.annotation))
            ]
            returns = ast.unparse(node.returns) if node.returns is not None else ""
            bad_return = "row" in node.name and DICT_ROWS.search(returns)
            if bad or bad_return:
                arrow = f" -> {returns}" if bad_return else ""
                found.append(f"{rel}:{node.lineno} {node.name}({', '.join(bad)}){arrow}")
    return found


def test_rows_read_back_are_typed_where_they_are_used() -> None:
    found = [
        s
        for s in dict_row_signatures(REPO, TYPED)
        if f"{s.split(':')[0]}:{s.split(' ')[1].split('(')[0]}" not in WRITE_SIDE
    ]
    assert found == [], "dict rows in signatures that take rows read back:\n" + "\n".join(found)


def test_the_check_sees_a_dict_row(tmp_path: Path) -> None:
    """The check is not blind: each way a dict row can come back is found."""
    (tmp_path / "m.py").write_text(
        "from typing import Any\n"
        "from collections.abc import Mapping\n"
        "def a(row: dict[str, Any]) -> str: ...\n"
        "def b(rows: list[dict[str, Any]]) -> None: ...\n"
        "def c(rec: Mapping[str, Any], x: int) -> None: ...\n"
        "def read_rows(p: str) -> Iterator[dict[str, Any]]: ...\n"
        "def fine(row: Row, rows: list[Row], extra: dict[str, Any]) -> dict[str, Any]: ...\n"
    )
    found = dict_row_signatures(tmp_path, ["m.py"])
    assert [s.split(" ", 1)[1] for s in found] == [
        "a(row)",
        "b(rows)",
        "c(rec)",
        "read_rows() -> Iterator[dict[str, Any]]",
    ]


def test_rows_come_back_as_row(tmp_path: Path) -> None:
    from gpulane.record import Row, RowWriter, read_rows
    from gpulane.rundir import RunDir

    with RowWriter(tmp_path) as w:
        w.write(Row.collective(run_id="r", backend="torch", op="all_reduce", size_bytes=8))
        w.write({"run_id": "r", "kind": "copy", "backend": "b", "op": "h2d", "new_key": 1})
        w.write({"kind": "copy", "op": "d2h"})  # written by hand: no run_id, no backend
    rows = list(read_rows(tmp_path))
    assert all(type(r) is Row for r in rows) and RunDir.at(tmp_path).rows() == rows
    assert rows[0].size_bytes == 8 and rows[0].kind == "collective"
    assert rows[1].extra == {"new_key": 1} and rows[1].status == "ok"  # defaults filled
    assert (rows[2].op, rows[2].run_id, rows[2].backend) == ("d2h", None, None)


def test_frame_rows_give_the_rows_of_a_frame_back() -> None:
    """rows_frame and frame_rows are each other's inverse; a column that is no field
    (the store's run_dir) rides in extra, a field the frame lacks is None."""
    from gpulane.record import FIELDS, Row, frame_rows, row_value, rows_frame

    rows = [
        Row.copy(run_id="r", backend="cuda", op="h2d", src="host", dst=f"GPU{k}", extra={"k": k})
        for k in range(3)
    ]
    frame = rows_frame(rows)
    assert list(frame.columns) == list(FIELDS)
    assert frame_rows(frame) == rows  # one kind: no column of numbers and None made floats
    back = frame_rows(frame.assign(run_dir="d").drop(columns=["host"]))
    assert [r.extra for r in back] == [{"k": k, "run_dir": "d"} for k in range(3)]
    assert {r.host for r in back} == {None} and row_value(back[2], "run_dir") == "d"
    assert row_value(back[2], "dst") == "GPU2" and row_value(back[0], "nothing") is None


if __name__ == "__main__":
    hits = dict_row_signatures(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO)
    print("\n".join(hits))
    print(f"{len(hits)} signatures take or return dict rows")
