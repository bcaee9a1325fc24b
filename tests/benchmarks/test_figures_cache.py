"""benchmarks/figures.py reads a file once per process while its bytes stay the same: a
changed file is read again (never stale rows), a caller's change to a record does not
reach the next reader, and libyaml's loader reads every README's blocks as PyYAML's
Python loader does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from benchmarks import figures
from benchmarks.check import readmes


def _readme(tmp_path: Path, shown: str) -> Path:
    readme = tmp_path / "README.md"
    readme.write_text(
        f"The figure is {shown}.\n\n```figures\n- id: x\n  file: rows.jsonl\n"
        f'  value: one.v\n  shown: "{shown}"\n```\n'
    )
    return readme


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"v": 1}\n')
    before = os.stat(rows)
    assert [f.ok for f in figures.check_readme(_readme(tmp_path, "1"))] == [True]
    # same size, same mtime: a rewrite within one tick of the clock looks unchanged by stat
    rows.write_text('{"v": 2}\n')
    os.utime(rows, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(rows).st_size == before.st_size
    figs = figures.check_readme(_readme(tmp_path, "2"))
    assert [f.values for f in figs] == [[2.0]]
    assert [f.ok for f in figs] == [True]


def test_the_same_file_is_parsed_once_and_records_are_fresh(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"v": 1}\n{"v": 3}\n')
    spec = {"id": "x", "file": "rows.jsonl"}
    first = figures.read_records(rows, spec)
    first[0]["_file"] = "elsewhere"  # what compute does to a record it keeps
    parsed = len(figures._READ)
    second = figures.read_records(rows, spec)
    assert len(figures._READ) == parsed  # no new parse
    assert second == [{"v": 1}, {"v": 3}]
    # read another way (a regex), the same file is parsed again for that reader
    other = figures.read_records(rows, {**spec, "pattern": r'"v": (?P<v>\d)'})
    assert [r.v for r in other] == [1, 3]
    assert len(figures._READ) == parsed + 1


def test_libyaml_reads_every_readme_block_as_python_yaml_does() -> None:
    if figures.SAFE_LOADER is yaml.SafeLoader:
        pytest.skip("PyYAML without libyaml: the Python loader is the one used")
    seen = 0
    for readme in readmes():
        for block in figures.blocks(readme.read_text(encoding="utf-8")):
            fast = yaml.load(block, Loader=figures.SAFE_LOADER)
            assert fast == yaml.load(block, Loader=yaml.SafeLoader), readme
            seen += 1
    assert seen > 30
