"""The one launcher registry: the built-in launchers come from it, a launcher added from
a test module (tests/launch/plugin_launcher.py + its YAML, nothing in gpulane/) runs a
real 2-rank gloo sweep, and a launcher that cannot run copies or token runs says so in
one line."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gpulane.config.commands import SweepConfig
from gpulane.config.launcher import (
    LocalLauncherConfig,
    MpirunLauncherConfig,
    SlurmLauncherConfig,
)
from gpulane.errors import InputError
from gpulane.launch.local import LocalLauncher
from gpulane.launch.mpirun.launcher import MpirunLauncher
from gpulane.launch.registry import entry, launcher_modules, make_launcher, node_launcher
from gpulane.launch.slurm.launcher import SlurmLauncher
from tests.helpers import gpulane, rows_of, run_dirs

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "tests.launch.plugin_launcher"


def test_built_in_launchers_are_found_by_their_decorator() -> None:
    modules = launcher_modules()
    assert "gpulane.launch.local" in modules
    assert "gpulane.launch.mpirun.launcher" in modules
    assert "gpulane.launch.slurm.launcher" in modules
    for name, config, launcher in (
        ("local", LocalLauncherConfig, LocalLauncher),
        ("mpirun", MpirunLauncherConfig, MpirunLauncher),
        ("slurm", SlurmLauncherConfig, SlurmLauncher),
    ):
        found = entry(name)
        assert (found.config, found.launcher) == (config, launcher)
    with pytest.raises(InputError, match=r"unknown launcher 'k8s'; use one of .*local"):
        entry("k8s")


def test_make_launcher_builds_each_from_its_config() -> None:
    local = make_launcher(SweepConfig(launcher=LocalLauncherConfig(bind="core")))
    assert isinstance(local, LocalLauncher) and local.bind == "core" and local.on_this_host
    mpirun = make_launcher(SweepConfig(launcher=MpirunLauncherConfig(hostfile="/h")))
    assert isinstance(mpirun, MpirunLauncher) and not mpirun.on_this_host
    slurm = make_launcher(SweepConfig(launcher=SlurmLauncherConfig(nodes=2, tasks_per_node=3)))
    assert isinstance(slurm, SlurmLauncher) and slurm.settings.world_size == 6
    assert slurm.lone_rank_warning() and local.lone_rank_warning() is None
    # A composed node (Hydra's DictConfig) goes through the same registry.
    node = OmegaConf.create({"launcher": {"name": "local", "bind": "none"}})
    assert isinstance(make_launcher(node), LocalLauncher)


def test_campaign_elements_get_their_launcher_from_the_registry() -> None:
    local = SweepConfig(launcher=LocalLauncherConfig())
    assert isinstance(node_launcher(local, "cpu", ["localhost"]), LocalLauncher)
    with pytest.raises(InputError, match="launcher=local cannot put ranks on named nodes"):
        node_launcher(local, "cpu", ["node01", "node02"])
    slurm = node_launcher(SweepConfig(launcher=SlurmLauncherConfig()), "cpu", ["a", "b"])
    assert isinstance(slurm, SlurmLauncher) and slurm.settings.nodes == 2
    assert slurm.settings.sbatch_args == {"no_requeue": True}


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "GPULANE_PLUGINS": PLUGIN}


def test_a_launcher_from_a_test_module_runs_a_real_gloo_sweep(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    out = gpulane(
        "sweep",
        "launcher=plugin",
        "launcher.greeting=hi",
        "ranks=2",
        "device=cpu",
        "sizes.max=64",
        "progress=false",
        f"results_dir={runs}",
        cwd=tmp_path,
        timeout=240,
        env=_env(),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 processes started by the plugin launcher" in out.stdout
    (run,) = run_dirs(runs)
    assert (run / "started-by-plugin.txt").read_text() == "hi 2\n"
    rows = rows_of(run)
    assert len(rows) == 4 and {r["world_size"] for r in rows} == {2}
    assert {r["backend"] for r in rows} == {"torch-gloo"}
    assert all(r["status"] == "ok" and r["wrong"] == 0 for r in rows if r["time_us"])
    saved = OmegaConf.load(run / "config.yaml")
    assert saved.launcher.name == "plugin" and saved.launcher.greeting == "hi"
    # Nothing in gpulane/ knows this launcher: it is its module and its YAML alone.
    core = [p for p in (ROOT / "gpulane").rglob("*") if p.suffix in (".py", ".yaml")]
    assert not [p for p in core if "plugin_launcher" in p.read_text(encoding="utf-8")]


def test_unknown_plugin_module_is_one_error_line(tmp_path: Path) -> None:
    env = {**_env(), "GPULANE_PLUGINS": "tests.launch.no_such_module"}
    out = gpulane("sweep", "device=cpu", cwd=tmp_path, env=env)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "gpulane: error: GPULANE_PLUGINS: cannot import tests.launch.no_such_module"
    ), out.stderr


@pytest.mark.parametrize(
    ("command", "launcher", "what"),
    [("copy", "plugin", "copies"), ("tokens", "slurm", "token runs"), ("copy", "mpirun", "copies")],
)
def test_a_launcher_that_cannot_run_host_jobs_says_so(
    tmp_path: Path, command: str, launcher: str, what: str
) -> None:
    out = gpulane(
        command, f"launcher={launcher}", f"results_dir={tmp_path}", cwd=tmp_path, env=_env()
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"gpulane: error: launcher={launcher} cannot run {what}: their ranks run on this host, "
        "where their GPUs were counted; use launcher=local"
    ], out.stderr
    assert run_dirs(tmp_path) == []


def test_slurm_keys_are_defined_once() -> None:
    from gpulane.launch.slurm.settings import SlurmSettings, settings

    assert issubclass(SlurmSettings, SlurmLauncherConfig)
    own = {f.name for f in dataclasses.fields(SlurmSettings)}
    assert own == {f.name for f in dataclasses.fields(SlurmLauncherConfig)}
    s = settings(SweepConfig(launcher=SlurmLauncherConfig(nodes=2, gpus_per_node=4, time=5)))
    assert (s.world_size, s.time_min, s.tasks_per_node) == (8, 5, 4)


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("launcher.poll_s=0", "launcher.poll_s: expected seconds > 0, got 0"),
        ("launcher.nodes=0", "launcher.nodes: expected a whole number >= 1, got 0"),
        ("launcher.pattern=star", "launcher.pattern: expected one of allocation, per-node"),
        ("launcher.outlier_fraction=2", "launcher.outlier_fraction: expected a fraction in (0, 1)"),
    ],
)
def test_slurm_keys_are_checked_before_anything_starts(
    tmp_path: Path, override: str, words: str
) -> None:
    # The front checks them (SlurmLauncherConfig.validate): no cluster is asked anything.
    out = gpulane("sweep", "launcher=slurm", override, f"results_dir={tmp_path}", cwd=tmp_path)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpulane: error: {words}"), out.stderr
    assert run_dirs(tmp_path) == []
