"""A multirun ends with the compare table of the runs it made, and the same comparison as
a page in the multirun directory (the CompareCallback every command has)."""

from __future__ import annotations

from pathlib import Path

from tests.browser import assert_fits, render
from tests.helpers import gpulane, run_dirs


def test_multirun_ends_with_the_comparison_of_its_runs(tmp_path: Path) -> None:
    results = tmp_path / "runs"
    proc = gpulane(
        # presets are NCCL's (refused on gloo): CPU runs are told apart by their labels
        "sweep", "-m", "build=riser-x4,x16,nvlink", "ranks=2", "device=cpu",
        "sizes.min=8", "sizes.max=64K", "iters=3", "warmup=1", "progress=false",
        f"results_dir={results}", cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert len(run_dirs(results)) == 3
    tail = proc.stdout[proc.stdout.index("# multirun: 3 runs compared") :]
    assert "Compare: riser-x4 vs x16 vs nvlink" in tail
    assert "all_reduce float 64 KiB in-place" in tail
    (page,) = (results / "multirun").glob("*/compare.html")
    assert f"# page: {page}" in tail
    shown = render(page, tmp_path / "browser")
    for section in ("verdict", "topology", "collectives", "figures", "advice"):
        assert section in shown.dom.ids, section
    words = shown.dom.words()
    assert "riser-x4" in words and "x16" in words
    assert_fits(shown)


def test_one_run_is_nothing_to_compare(tmp_path: Path) -> None:
    proc = gpulane(
        "sweep", "-m", "build=one", "ranks=2", "device=cpu", "sizes.min=8",
        "sizes.max=8", "iters=2", "warmup=1", "progress=false",
        f"results_dir={tmp_path}", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "# multirun: 1 run(s) made, nothing to compare" in proc.stdout
    assert not list(tmp_path.glob("multirun/*/compare.html"))


def test_a_multirun_of_one_build_is_labelled_by_what_it_swept(tmp_path: Path) -> None:
    """``-m sizes.max=...`` makes runs of one build: their columns read the swept values,
    not the run ids (``20261202-0112…``, cut in the table)."""
    results = tmp_path / "runs"
    proc = gpulane(
        "sweep", "-m", "sizes.max=64,256", "ranks=2", "device=cpu", "sizes.min=8",
        "iters=2", "warmup=1", "progress=false", f"results_dir={results}",
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    tail = proc.stdout[proc.stdout.index("# multirun: 2 runs compared") :]
    assert "Compare: sizes.max=64 vs sizes.max=256" in tail, tail[:600]
