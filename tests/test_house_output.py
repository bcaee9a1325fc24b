"""One output channel and one door to the run files, checked in the source: only the
command and session layers print, and only the run directory's own module names the
rows files."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gpulane"

# The layers that own the terminal: the commands (and their table) and the session.
MAY_PRINT = ("commands/", "session/", "cli.py")


def print_calls(source: str) -> list[int]:
    """Lines that call the builtin print (a method called print, console.print, is not)."""
    tree = ast.parse(source)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
    ]


def test_print_calls_are_found() -> None:
    assert print_calls("print('x')\nconsole.print('y')\nx = print\n") == [1]
    assert print_calls("def f():\n    if True:\n        print(1, flush=True)\n") == [3]


def test_only_commands_and_the_session_print() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(MAY_PRINT):
            continue
        found += [f"gpulane/{rel}:{line}" for line in print_calls(path.read_text())]
    assert found == [], "print() outside commands/ and session/ (say it through a Say): " + (
        ", ".join(found)
    )


# The run directory's files are named in one place: rundir (RunDir) and record (its files'
# writer, beneath it); everything else asks RunDir.
ROWS_FILES = ("rows.jsonl", "rows.parquet")
MAY_NAME_ROWS_FILES = ("rundir.py", "record.py")


def file_names(source: str) -> list[tuple[int, str]]:
    """String literals that are a rows file's name (``d / "rows.jsonl"``, ``rglob(...)``);
    words for the user that mention one (help, errors) are not a way to the file."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and node.value.strip().strip("/") in ROWS_FILES
    ]  # fmt: skip


def test_file_names_are_found() -> None:
    assert file_names('p / "rows.jsonl"\nprint("no rows.jsonl here")\n') == [(1, "rows.jsonl")]


def test_rows_files_are_reached_through_the_run_directory() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in MAY_NAME_ROWS_FILES:
            continue
        found += [f"gpulane/{rel}:{line}: {text!r}" for line, text in file_names(path.read_text())]
    assert found == [], "rows files named outside rundir.py (use RunDir): " + "; ".join(found)
