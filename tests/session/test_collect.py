"""``gpulane collect`` asks the launcher that made the run (its saved launcher.name) to
follow it again: a launcher whose runs are never left running says so in one line."""

from __future__ import annotations

from pathlib import Path

from tests import helpers

ROOT = Path(__file__).resolve().parents[2]


def test_a_local_run_has_nothing_to_collect(tmp_path: Path) -> None:
    res = helpers.gpulane(
        "sweep", "device=cpu", "sizes.max=16", "iters=2", "warmup=1", "progress=false",
        f"results_dir={tmp_path}", cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    res = helpers.gpulane("collect", "--no-wait", str(run), cwd=ROOT)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"gpulane: error: {run}: a run of launcher=local is not left running; nothing to collect"
    ]


def test_not_a_run_directory(tmp_path: Path) -> None:
    res = helpers.gpulane("collect", str(tmp_path), cwd=ROOT)
    assert res.returncode == 2
    assert res.stderr.strip() == (
        f"gpulane: error: {tmp_path}: no config.yaml; not a gpulane run directory"
    )
