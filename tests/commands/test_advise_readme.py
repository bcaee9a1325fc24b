"""README.md's advise step, run on the rows its earlier steps make (issue 44.11): the
default job (a host-named build) and a run labelled nvlink, as the preset multirun
labels its runs. The README's command names its build and works; without build= the
advisor refuses to pick one of several builds, as the README says."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_advise_line() -> list[str]:
    for line in README.read_text().splitlines():
        if line.startswith("gpulane advise ") and "run=runs/" in line:
            return shlex.split(line.split("#")[0])[2:]
    raise AssertionError("README.md has no `gpulane advise ... run=runs/` line")


def gpulane(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gpulane", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd)


def test_readme_advise_step_on_the_readme_runs(tmp_path: Path) -> None:
    for build in ("vm", "nvlink"):
        made = gpulane("sweep", "device=cpu", "sizes.max=4K", "progress=false",
                       f"build={build}", "results_dir=runs", cwd=tmp_path)  # fmt: skip
        assert made.returncode == 0, made.stderr
    args = readme_advise_line()
    assert "build=nvlink" in args
    # CPU ranks name no GPU: the README says to give gpu=, and that it warns
    out = gpulane("advise", *args, "gpu=H200", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "sets CPU collectives beside GPU compute" in README.read_text().replace("\n", " ")
    assert "collective times measured on CPU ranks" in out.stderr
    assert "recommended for latency" in out.stdout and "roofline only" in out.stdout
    # the all_gather of the logits comes from the build's all_reduce curve
    assert "as all_reduce of half the bytes" in out.stdout
    without = [a for a in args if not a.startswith("build=")]
    refused = gpulane("advise", *without, "gpu=H200", cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "gpulane: error: advise: the collective rows hold several builds (nvlink, vm); "
        "choose one with build=LABEL"
    ]
