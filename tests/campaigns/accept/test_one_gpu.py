"""accept on one GPU: collectives are not run (1-rank rows would be busbw 0), one line
says so; localization cannot apply (neither passed nor failed, never a FAIL)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from gpulane.analysis.rules import FAIL, SKIP, Check
from gpulane.campaigns.accept.localize import localize_checks
from gpulane.campaigns.accept.suite import ONE_GPU, Step, step_checks, suite_steps
from tests.campaigns.accept.test_suite import _cfg


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_the_sweep_runs_on_two_gpus_or_more(tmp_path: Path, gpus: int) -> None:
    names = [s.name for s in suite_steps(_cfg(), tmp_path, "b", gpus)]
    assert ("sweep" in names) == (gpus > 1) and "copy" in names
    steps = [Step(n, [], rc=0) for n in names]
    lines = [c for c in step_checks(steps, gpus) if c.status == SKIP]
    assert [c.message for c in lines] == ([ONE_GPU] if gpus == 1 else [])


def test_asked_for_ranks_the_one_gpu_sweep_runs(tmp_path: Path) -> None:
    """ranks=2 (or device=cpu) of the user's own: measured as asked."""
    cfg = _cfg(sweep_overrides=["ranks=2", "device=cpu"])
    assert "sweep" in [s.name for s in suite_steps(cfg, tmp_path, "b", 1)]


def test_localization_on_one_gpu_is_not_applicable(tmp_path: Path) -> None:
    failed = Check("all_reduce_busbw_nvlink", FAIL, "expected", "vm", "slow", figure="all_reduce")
    for mode in ("auto", "always"):
        cfg = SimpleNamespace(
            suite=SimpleNamespace(localize=mode, localize_pattern="pairs", collectives=[]),
            launcher=None,
        )
        (line,), step = localize_checks(cfg, tmp_path, "b", [failed], None, [], 1)
        assert step is None and line.status == SKIP
        assert "not applicable: localization needs at least 2 GPUs, got 1" in line.message
    assert not (tmp_path / "localize").exists()
