"""advise says what it combined and warns where figures of different kinds meet: a real
gloo sweep (CPU ranks) beside an H100 roofline, or beside an imported nccl-tests log of an
H200 under the same build label, and a GPU model named only by rows it does not use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import fixture_path
from tests.helpers import gpulane, run_dirs

ADVISE = ["model=llama3-8b", "gpus=2", "batch=1", "input_len=128", "output_len=8"]
H200_LOG = fixture_path("h200x2/nccl-tests-all_reduce.txt")


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep on two gloo ranks, build `box`."""
    root = tmp_path_factory.mktemp("cpu")
    out = gpulane(
        "sweep", "device=cpu", "collectives=all_reduce,all_gather,sendrecv", "sizes.max=4K",
        "iters=2", "warmup=0", "build=box", f"results_dir={root}", "progress=false",
        cwd=root,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (run,) = run_dirs(root)
    return run


def _runs_with(tmp_path: Path, cpu_run: Path, h200_build: str | None = None) -> Path:
    """runs/ with the CPU sweep, and the H200 nccl-tests log imported under ``h200_build``."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(cpu_run, runs / cpu_run.name)
    if h200_build is not None:
        parsed = gpulane(
            "parse", "nccl-tests", str(H200_LOG), "--build", h200_build,
            "--out", str(runs / "h200"), cwd=tmp_path,
        )  # fmt: skip
        assert parsed.returncode == 0, parsed.stderr
    return runs


def test_cpu_curves_beside_a_gpu_roofline_warn(tmp_path: Path, cpu_run: Path) -> None:
    runs = _runs_with(tmp_path, cpu_run)
    out = gpulane("advise", "build=box", f"results_dir={runs}", "gpu=H100", *ADVISE, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (
        "gpulane: warning: advise: collective times measured on CPU ranks (torch-gloo) are set "
        "beside the H100 roofline"
    ) in out.stderr
    assert (
        "# collective rows: " in out.stdout
        and f"run {cpu_run.name} (torch-gloo, CPU ranks, measured)" in out.stdout
    )
    assert "# gpu model: H100 (given: gpu=H100)" in out.stdout
    doc = json.loads(
        gpulane(
            "advise", "build=box", f"results_dir={runs}", "gpu=H100", *ADVISE, "format=json",
            cwd=tmp_path,
        ).stdout
    )  # fmt: skip
    assert any("CPU ranks" in w for w in doc["inputs"]["warnings"])


def test_a_directory_mixing_machines_says_what_it_combined(tmp_path: Path, cpu_run: Path) -> None:
    """runs/ holds the CPU sweep and an H200 nccl-tests log imported under the same build
    label: the advice mixed both curves and took the H200 without a word."""
    runs = _runs_with(tmp_path, cpu_run, h200_build="box")
    out = gpulane("advise", f"run={runs}", *ADVISE, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "come from different machines (CPU ranks, NVIDIA H200)" in out.stderr
    assert "set beside the NVIDIA H200 roofline" in out.stderr
    assert f"imported from {H200_LOG}" in out.stdout
    assert "# gpu model: NVIDIA H200 (from rows of run " in out.stdout


def test_a_gpu_named_only_by_rows_not_used_is_not_taken(tmp_path: Path, cpu_run: Path) -> None:
    """The H200 log is of another build: its GPU is not the CPU build's GPU."""
    runs = _runs_with(tmp_path, cpu_run, h200_build="other")
    out = gpulane("advise", f"run={runs}", "build=box", *ADVISE, cwd=tmp_path)
    assert out.returncode == 2
    assert (
        "gpulane: warning: advise: only rows it does not use name a GPU (NVIDIA H200, from rows "
        "of run "
    ) in out.stderr
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("gpulane: error:")]
    assert len(errors) == 1 and "set gpu=NAME" in errors[0]
    assert "Traceback" not in out.stderr
