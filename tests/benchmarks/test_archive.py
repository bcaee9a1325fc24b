"""benchmarks/archive.py: a run folder packed as <folder>.zip reads as the folder did, for
the figures check (files, globs, a regenerated output, the tracked-file check) and for a
script given the folder; packing is deterministic; a member that is not there stays
missing, so that a figure naming it still fails."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from benchmarks import archive
from benchmarks.check import untracked
from benchmarks.figures import check_readme

ROWS = [
    {"op": "decode", "batch": 1, "time_us": 5433.48, "status": "ok"},
    {"op": "decode", "batch": 16, "time_us": 6776.0, "status": "ok"},
]


def _runs(root: Path) -> Path:
    """root/round/{a,b}/rows.jsonl and root/round/notes.md, with a README in root."""
    for name, row in zip(("a", "b"), ROWS, strict=True):
        (root / "round" / name).mkdir(parents=True)
        (root / "round" / name / "rows.jsonl").write_text(json.dumps(row) + "\n")
    (root / "round" / "notes.md").write_text("| batch | ms |\n|---|---|\n| 1 | 5.433 |\n")
    return root / "round"


@pytest.fixture(autouse=True)
def _fresh() -> object:
    before = archive.unpacked_now()  # other modules' (unpacked when they were collected)
    yield
    archive.cleanup(keep=before)  # what this test unpacked, gone before the next one


def _packed(tmp_path: Path, keep: tuple[str, ...] = ()) -> Path:
    folder = _runs(tmp_path)
    out = archive.pack(folder, keep)
    for p in sorted(folder.rglob("*"), reverse=True):  # the folder leaves, as git rm does
        if p.relative_to(folder).parts[0] in keep:
            continue
        p.unlink() if p.is_file() else p.rmdir()
    if not keep:
        folder.rmdir()
    return out


def test_pack_is_deterministic_and_keeps_out_what_is_named(tmp_path: Path) -> None:
    first = archive.pack(_runs(tmp_path / "x"), ("b",)).read_bytes()
    second = archive.pack(_runs(tmp_path / "y"), ("b",)).read_bytes()
    assert first == second  # the same files give the same bytes: git sees no change
    names = zipfile.ZipFile(tmp_path / "x" / "round.zip").namelist()
    assert names == ["a/rows.jsonl", "notes.md"]


def test_glob_and_real_read_the_members_by_their_old_names(tmp_path: Path) -> None:
    _packed(tmp_path)
    found = archive.glob(tmp_path, "round/*/rows.jsonl")
    assert found == [tmp_path / "round/a/rows.jsonl", tmp_path / "round/b/rows.jsonl"]
    assert json.loads(archive.real(found[1]).read_text())["batch"] == 16
    assert archive.virtual(archive.real(found[1])) == found[1]
    assert archive.archive_of(found[0]) == tmp_path / "round.zip"
    # what is not in the archive stays missing: the caller's own error names it
    assert archive.glob(tmp_path, "round/*/rows.parquet") == []
    assert not archive.real(tmp_path / "round/c/rows.jsonl").exists()


def test_a_folder_kept_in_part_reads_as_both_halves(tmp_path: Path) -> None:
    _packed(tmp_path, keep=("b",))
    merged = archive.real(tmp_path / "round")
    assert sorted(p.parent.name for p in merged.glob("*/rows.jsonl")) == ["a", "b"]
    assert archive.real(tmp_path / "round/b/rows.jsonl") == tmp_path / "round/b/rows.jsonl"


def test_figures_read_a_packed_folder_and_fail_on_a_changed_number(tmp_path: Path) -> None:
    _packed(tmp_path)
    block = """- id: step
  file: round/*/rows.jsonl
  where: batch == 1 and _file == "round/a/rows.jsonl"
  value: one.time_us / 1e3
  shown: "{shown} ms"
- id: table
  file: round/notes.md
  value: rows[0].ms
  shown: "{shown}"
"""
    readme = tmp_path / "README.md"
    readme.write_text(f"Took 5.433 ms.\n\n```figures\n{block.format(shown='5.433')}```\n")
    figs = check_readme(readme)
    assert [f.problems for f in figs] == [[], []]
    assert [f.value for f in figs] == [pytest.approx(5.43348), pytest.approx(5.433)]
    readme.write_text(f"Took 5.434 ms.\n\n```figures\n{block.format(shown='5.434')}```\n")
    assert all(any("computed 5.433" in p for p in f.problems) for f in check_readme(readme))


def test_a_regenerated_output_inside_the_archive_is_compared(tmp_path: Path) -> None:
    _packed(tmp_path)
    script = tmp_path / "cat.py"
    script.write_text("import sys; print(open(sys.argv[1]).read(), end='')\n")
    rows = archive.real(tmp_path / "round/a/rows.jsonl")
    block = f"""- id: same
  run: python {script} {rows}
  output: round/a/rows.jsonl
- id: other
  run: python {script} {archive.real(tmp_path / "round/b/rows.jsonl")}
  output: round/a/rows.jsonl
"""
    readme = tmp_path / "README.md"
    readme.write_text(f"No figures.\n\n```figures\n{block}```\n")
    same, other = check_readme(readme)
    assert same.problems == []
    assert any("differs" in p for p in other.problems)


def test_untracked_asks_git_about_the_archive_not_the_member(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    member = repo / "benchmarks/inference/h200-round10/floor.json"  # packed on main
    assert archive.archive_of(member) == repo / "benchmarks/inference/h200-round10.zip"
    assert untracked([member]) == set()
    loose = repo / "benchmarks/inference/not-committed.json"  # no archive holds it either
    assert untracked([member, loose]) == {loose}


def test_the_command_line_packs_and_unpacks_and_says_what_is_wrong(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        repo = Path(__file__).resolve().parents[2]
        return subprocess.run([sys.executable, "-m", "benchmarks.archive", *args],
                              capture_output=True, text=True, cwd=repo)  # fmt: skip

    folder = _runs(tmp_path)
    assert cli("pack", str(folder)).returncode == 0
    (tmp_path / "round.zip").rename(tmp_path / "copy.zip")
    assert cli("unpack", str(tmp_path / "copy.zip")).returncode == 0
    assert (tmp_path / "copy/a/rows.jsonl").read_text() == (folder / "a/rows.jsonl").read_text()
    bad = cli("pack", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and "nowhere: not a folder" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_forked_childs_exit_leaves_the_parents_unpacked_folder(tmp_path: Path) -> None:
    """A child forked after an archive was unpacked (the test worker's CLI fork server)
    inherits the exit handlers: its exit must not remove the folder its parent reads (CI
    lost h200x2's unpacked copy_bw.json that way mid-run)."""
    import atexit
    import os

    _packed(tmp_path)
    where = archive.real(tmp_path / "round/a/rows.jsonl")
    assert where.exists()
    pid = os.fork()
    if pid == 0:
        atexit._run_exitfuncs()  # what the child's own interpreter exit runs
        os._exit(0)
    os.waitpid(pid, 0)
    assert where.exists()
