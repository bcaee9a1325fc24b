"""A sweep prepared once: the plan, the backend choice and the launcher's settings are
worked out once in the process that starts the run, and the ranks read the plan they are
given instead of building it again (a real gloo sweep of two real rank processes)."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpulane.collectives.plan import SweepPlan, build_plan
from gpulane.config.backend import AutoBackendConfig, MpiBackendConfig
from gpulane.launch.slurm.launcher import SlurmLauncher
from gpulane.rundir import PLAN_FILE, RunDir, make_run_dir
from gpulane.session import packing
from gpulane.session.prepare import launcher_for, prepare
from gpulane.session.sweep import run_prepared
from tests.helpers import gpulane, local_job_config, rows_of, run_dirs
from tests.launch.test_slurm_patterns import cfg_for

# Imported first by every Python process started with this folder on PYTHONPATH: counts
# build_plan's calls in that process, in a file named after its pid (written at start and
# at every call, so a rank that never calls it still leaves "0"; at start, a `-m` module is
# still "-m" in sys.argv: a rank started as a new process is told by its --run-dir, a rank
# forked from the server that imported torch (launcher.start=fork) by "forked").
SITECUSTOMIZE = """
import os, sys

_out = os.environ.get("GPULANE_TEST_PLAN_CALLS")
if _out:
    import gpulane.collectives.plan as _plan

    _calls = [0]
    _forked = []
    _build = _plan.build_plan

    def _write():
        with open(os.path.join(_out, str(os.getpid())), "w") as fh:
            fh.write(f"{_calls[0]}\\n" + " ".join(_forked or sys.argv))

    def _child():
        _calls[0] = 0
        _forked.append("forked")
        _write()

    os.register_at_fork(after_in_child=_child)

    def build_plan(*args, **kwargs):
        _calls[0] += 1
        _write()
        return _build(*args, **kwargs)

    _plan.build_plan = build_plan
    _write()
"""


def plan_calls(tmp_path: Path, *args: str) -> tuple[Any, dict[str, int]]:
    """A real `gpulane sweep` with build_plan counted in every process it starts: the
    command's result and {command line: calls}."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    counts = tmp_path / "counts"
    counts.mkdir()
    path = os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", ""), str(Path.cwd())])
    env = {"PYTHONPATH": path, "GPULANE_TEST_PLAN_CALLS": str(counts)}
    out = gpulane("sweep", *args, f"results_dir={tmp_path / 'runs'}", cwd=tmp_path, env=env)
    seen = {}
    for f in counts.iterdir():
        calls, argv = f.read_text().split("\n", 1)
        seen[f"{f.name}: {argv}"] = int(calls)
    return out, seen


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_build_plan_runs_once_in_the_front_and_never_in_a_rank(tmp_path: Path, start: str) -> None:
    out, seen = plan_calls(
        tmp_path, "ranks=2", "device=cpu", "collectives=all_reduce", "sizes.min=1K",
        "sizes.max=4K", "warmup=1", "iters=2", f"launcher.start={start}",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rank_mark = "forked" if start == "fork" else "--run-dir"
    front = {k: n for k, n in seen.items() if " sweep " in k}
    ranks = {k: n for k, n in seen.items() if rank_mark in k}
    others = {k: n for k, n in seen.items() if k not in front and k not in ranks}
    assert len(ranks) == 2, seen  # both real ranks ran with the counter
    # the command: once to run, and once more where -m values and the sweep plan are
    # checked before anything runs (commands/hydra_app.check_overrides)
    assert list(front.values()) in ([1], [2]), seen
    assert all(n == 0 for n in ranks.values()), seen  # the ranks read the plan given
    assert all(n == 0 for n in others.values()), seen  # the fork server, if any: never
    (run,) = run_dirs(tmp_path / "runs")
    plan = SweepPlan.from_dict(json.loads((run / PLAN_FILE).read_text()))
    assert plan.collectives == ["all_reduce"] and plan.sizes == [1024, 2048, 4096]
    assert {r["size_bytes"] for r in rows_of(run)} == {1024, 2048, 4096}


def test_ranks_measure_the_plan_they_are_given(tmp_path: Path) -> None:
    """The plan in the run directory, not the configuration, says what the ranks measure:
    a plan narrowed after the configuration was saved is what the rows show."""
    cfg = local_job_config(tmp_path)
    cfg.collectives = ["all_reduce"]
    cfg.sizes.min, cfg.sizes.max = 1024, 16384
    sweep = prepare(cfg)
    assert sweep.route == "plain" and sweep.world == 2 and sweep.device == "cpu"
    assert sweep.plan.sizes == [1024, 2048, 4096, 8192, 16384]
    import dataclasses

    narrowed = dataclasses.replace(sweep, plan=dataclasses.replace(sweep.plan, sizes=[2048]))
    run = make_run_dir(cfg)
    assert run_prepared(narrowed, run) == 0
    rows = run.rows()
    assert rows and {r.size_bytes for r in rows} == {2048}


def test_a_rank_without_a_plan_says_so(tmp_path: Path) -> None:
    run = RunDir("r", tmp_path, "b")
    with pytest.raises(Exception, match=PLAN_FILE):
        run.read_plan()


@pytest.mark.parametrize("on_device", [True, False])
def test_plan_round_trips_and_moves_between_buffers(tmp_path: Path, on_device: bool) -> None:
    cfg = local_job_config(tmp_path)
    cfg.sizes.min, cfg.sizes.max = 8, "auto"
    plan = build_plan(cfg, on_device)
    again = SweepPlan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    other = plan.for_device(not on_device)
    assert max(other.sizes) == (32 << 20 if on_device else 1 << 30)
    assert other.for_device(on_device) == plan
    cfg.sizes.max = 4096  # a size given: the same on either side
    fixed = build_plan(cfg, on_device)
    assert fixed.for_device(not on_device).sizes == fixed.sizes


def counting(monkeypatch: pytest.MonkeyPatch, module: str, name: str) -> list[int]:
    """Count the calls of ``module.name`` wherever it was imported by name."""
    mod = sys.modules[module]
    original: Callable[..., Any] = getattr(mod, name)
    calls = [0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    for m in list(sys.modules.values()):
        if (m.__name__ or "").startswith("gpulane") and getattr(m, name, None) is original:
            monkeypatch.setattr(m, name, wrapper)
    return calls


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    # imported before counting, so that every binding of the three is counted
    for module in ("gpulane.campaigns.run", "gpulane.launch.slurm.settings"):
        importlib.import_module(module)
    return {
        "settings": counting(monkeypatch, "gpulane.launch.slurm.settings", "settings"),
        "choose_backend": counting(monkeypatch, "gpulane.session.backend_choice", "choose_backend"),
        "build_plan": counting(monkeypatch, "gpulane.collectives.plan", "build_plan"),
    }


def once(counted: dict[str, list[int]]) -> dict[str, int]:
    return {k: v[0] for k, v in counted.items()}


def test_slurm_front_parses_the_settings_once(
    tmp_path: Path, counted: dict[str, list[int]]
) -> None:
    """One Slurm job: settings, backend and plan once, and the launcher built from the
    settings already parsed (srun through PMIx, as ranks that start MPI need)."""
    cfg = cfg_for(tmp_path, gpus_per_node=None)
    cfg.backend = AutoBackendConfig()
    sweep = prepare(cfg)
    assert sweep.route == "plain" and sweep.world == 2 and sweep.device == "cpu"
    assert str(sweep.cfg.backend.name) == "torch"  # auto resolved, once
    launcher = launcher_for(sweep)
    assert isinstance(launcher, SlurmLauncher)  # the registry's, from the plan
    assert "--mpi=pmix" in launcher.settings.srun_args
    assert sweep.launcher is not None
    assert "--mpi=pmix" not in sweep.launcher.settings.srun_args  # the parsed ones untouched
    assert once(counted) == {"settings": 1, "choose_backend": 1, "build_plan": 1}


def test_slurm_campaign_front_works_everything_out_once(
    tmp_path: Path, counted: dict[str, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    """A campaign (launcher.pattern, a dry run): the same three, once, before any job."""
    from gpulane.commands.sweep import campaign

    cfg = cfg_for(tmp_path, pattern="pairs", nodelist="gpu[01-03]", dry_run=True)
    cfg.backend = AutoBackendConfig()
    sweep = prepare(cfg)
    assert sweep.route == "campaign"
    assert run_prepared(sweep, campaign=campaign) == 0
    assert "gpu01+gpu02: sbatch " in capsys.readouterr().out
    assert once(counted) == {"settings": 1, "choose_backend": 1, "build_plan": 1}


def test_packed_combination_keeps_its_plan(tmp_path: Path, counted: dict[str, list[int]]) -> None:
    """A packed combination is prepared once; its plan is saved for the ranks and shown by
    its session later without being worked out again."""
    cfg = cfg_for(tmp_path, pack=True)
    packing.start_packing()
    try:
        sweep = prepare(cfg, packing=packing.packing())
        assert sweep.route == "packed"
        assert run_prepared(sweep) == 0
        (item,) = packing._PACK or []
        assert (item.run.path / PLAN_FILE).is_file()
        packing._session(item)
    finally:
        packing._PACK = None
    assert once(counted) == {"settings": 1, "choose_backend": 1, "build_plan": 1}
    cfg.backend = MpiBackendConfig()
    with pytest.raises(Exception, match="cannot be packed"):
        prepare(cfg, packing=True)
