"""The suite's commands: what its sweep is asked for, on 1, 2, 4 and 8 GPUs and on CPUs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpulane.campaigns.accept.suite import BESIDE_SWEEP, beside_sweep, suite_steps
from gpulane.config.commands import SuiteConfig
from gpulane.config.launcher import LocalLauncherConfig


def _cfg(**suite: Any) -> Any:
    """accept's configuration as the command hands it over (dataclasses, not DictConfig:
    a DictConfig's ``.copy`` is its method)."""
    return SimpleNamespace(
        timeout_s=300.0,
        env={},
        preset=SimpleNamespace(name="none"),
        launcher=LocalLauncherConfig(),
        suite=SuiteConfig(**suite),
    )


@pytest.mark.parametrize("gpus", [0, 2, 4, 8])  # 1 GPU runs no sweep: test_one_gpu.py
def test_the_figures_no_rule_reads_are_left_out(tmp_path: Path, gpus: int) -> None:
    steps = {s.name: s.command for s in suite_steps(_cfg(), tmp_path, "b", gpus)}
    assert "torch_overhead=false" in steps["sweep"]
    assert "plot=false" in steps.get("copy", ["plot=false"])
    assert ("topo" in steps) == ("copy" in steps) == (gpus > 0)
    # the probe is the step that runs beside the sweep; copies never do
    assert BESIDE_SWEEP == ("topo",)


def test_asked_for_the_overhead_is_measured(tmp_path: Path) -> None:
    cfg = _cfg(sweep_overrides=["torch_overhead=true", "iters=5"])
    sweep = next(s for s in suite_steps(cfg, tmp_path, "b", 4) if s.name == "sweep")
    assert [c for c in sweep.command if c.startswith("torch_overhead")] == ["torch_overhead=true"]


def test_only_a_read_only_probe_runs_beside_the_sweep(tmp_path: Path) -> None:
    steps = suite_steps(_cfg(), tmp_path, "b", 4)
    assert [s.name for s in beside_sweep(steps)] == ["topo"]
    loaded = suite_steps(_cfg(topo_args=["--under-load"]), tmp_path, "b", 4)
    assert beside_sweep(loaded) == []
    # no sweep: nothing to run beside
    alone = suite_steps(_cfg(sweep=False), tmp_path, "b", 4)
    assert [s.name for s in alone] == ["topo", "copy"] and beside_sweep(alone) == []


def test_the_suite_sweep_prints_no_runtime_warning(tmp_path: Path) -> None:
    """The suite's sweep, as accept starts it (2 CPU ranks, tiny sizes): its ranks' start
    says nothing of runpy. Started as ``-m gpulane.cli``, each forked rank re-ran the
    preloaded ``gpulane.cli`` as ``__mp_main__`` and printed runpy's RuntimeWarning."""
    import subprocess

    sweep = next(s for s in suite_steps(_cfg(), tmp_path, "b", 0) if s.name == "sweep")
    cmd = [*sweep.command, "sizes.min=4K", "sizes.max=4K", "iters=2", "warmup=1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RuntimeWarning" not in done.stderr + done.stdout
