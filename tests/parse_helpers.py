"""Running `gpulane parse` as a user does, on real captured files and on copies cut short
or in another encoding: the copies every importer's tests make, made one way here."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from gpulane.cli import main as cli_main
from tests.conftest import fixture_path


def run_parse(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`gpulane parse ARGS...` through the real command line: (exit status, stdout, stderr)."""
    status = cli_main(["parse", *args])
    out, err = capsys.readouterr()
    return status, out, err


def json_rows(out: str) -> list[dict[str, Any]]:
    """Rows printed by --json, read as strict JSON (no Infinity, no NaN)."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in a row: not strict JSON")

    return [json.loads(line, parse_constant=refuse) for line in out.splitlines() if line]


def cut_copy(tmp_path: Path, relative: str, after: str, keep: int, name: str = "") -> Path:
    """The fixture cut ``keep`` characters into the first ``after`` (a real file cut off
    inside a line, as an interrupted capture or copy leaves it)."""
    text = fixture_path(relative).read_text()
    at = text.index(after) + keep
    path = tmp_path / (name or Path(relative).name)
    path.write_text(text[:at])
    return path


def encoded_copy(
    directory: Path,
    source: Path | str,
    encoding: str = "utf-16",
    name: str | None = None,
    newline: str = "\n",
) -> Path:
    """A copy of a captured file (its path, or its text) in ``encoding``, with ``newline``
    line ends: what a capture on Windows leaves (PowerShell's ``>`` writes UTF-16 with a
    byte-order mark; ``utf-16-le`` has none). Named as the original unless ``name``."""
    text = source.read_text() if isinstance(source, Path) else source
    path = directory / (name or (source.name if isinstance(source, Path) else "copy.txt"))
    path.write_bytes(text.replace("\n", newline).encode(encoding))
    return path


def file_bytes(source: Path | str | bytes, encoding: str | None = "utf-8") -> bytes:
    """A file's bytes as they would be in ``encoding`` (None: the file's own bytes)."""
    if isinstance(source, bytes):
        return source
    if isinstance(source, Path):
        return source.read_bytes() if encoding is None else source.read_text().encode(encoding)
    return source.encode(encoding or "utf-8")


@contextlib.contextmanager
def random_cut(
    data: st.DataObject,
    source: Path | str | bytes,
    encoding: str | None = "utf-8",
    name: str = "cut.txt",
) -> Iterator[tuple[Path, bytes]]:
    """A copy of ``source`` (in ``encoding``) cut at a byte that hypothesis draws, 1 to
    one short of the whole (an interrupted capture or copy): (its path, the bytes kept).
    The copy lives in a directory of its own, gone after the block: hypothesis runs many
    examples in one test, which share one ``tmp_path``."""
    blob = file_bytes(source, encoding)
    cut = data.draw(st.integers(1, len(blob) - 1), label="cut")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(blob[:cut])
        yield path, blob[:cut]
