"""The one text reader: line ends, encodings, and whether the last line was complete."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.textio import iter_text_lines, iter_text_lines_ended, split_text_lines


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be"])
def test_lines_and_their_ends(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes("a 1.5\r\nb 4366.8\nc 436".encode(encoding))
    assert list(iter_text_lines_ended(path)) == [
        (1, "a 1.5", True),
        (2, "b 4366.8", True),
        (3, "c 436", False),
    ]
    assert list(iter_text_lines(path))[-1] == (3, "c 436")
    path.write_bytes("a\nb\n".encode(encoding))
    assert list(iter_text_lines_ended(path)) == [(1, "a", True), (2, "b", True)]


def test_text_in_memory_reads_the_same() -> None:
    assert list(split_text_lines("\ufeffa\r\nb\rc")) == [
        (1, "a", True),
        (2, "b", True),
        (3, "c", False),
    ]
    assert list(split_text_lines("a\n")) == [(1, "a", True)]
    assert list(split_text_lines("")) == []
