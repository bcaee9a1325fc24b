"""`gpulane reference add` on a run the README's CPU walk makes (issue 44): an accepted
CPU run is refused in one line saying why, not asked for a GPU path label it cannot have,
and `--path` does not file its CPU figures as a GPU reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def gpulane(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gpulane", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd)


def test_reference_add_refuses_an_accepted_cpu_run(tmp_path: Path) -> None:
    made = gpulane("sweep", "device=cpu", "sizes.min=1M", "sizes.max=1M", "progress=false",
                   "run_id=cpu-1", "results_dir=runs", cwd=tmp_path)  # fmt: skip
    assert made.returncode == 0, made.stderr
    run = tmp_path / "runs" / "cpu-1"
    # CPU ranks' rows are accepted knowingly (device=cpu), as the README says
    checked = gpulane("accept", "device=cpu", "run=runs/cpu-1", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for extra in ([], ["--path", "PIX"]):
        out = gpulane("reference", "add", str(run), *extra, cwd=tmp_path)
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.strip().splitlines() == [
            f"gpulane: error: {run}: the collective rows were measured on CPU ranks "
            "(torch-gloo); the reference table holds GPU figures: add a run made on GPUs"
        ]
        assert not (run.parent / "reference.yaml").exists()
