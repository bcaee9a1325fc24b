"""``gpulane collect RUN_DIR``: pick up a run submitted with ``launcher.wait=false``: wait for
(or check) its job, show its table, write the error row if it failed and the Parquet copy."""

from __future__ import annotations

import os
from pathlib import Path

from gpulane.config.commands import SweepConfig
from gpulane.config.load import load_saved
from gpulane.errors import InputError
from gpulane.launch.base import LaunchSpec
from gpulane.launch.slurm.launcher import SlurmLauncher
from gpulane.launch.slurm.monitor import JOB_FILE
from gpulane.launch.slurm.settings import settings
from gpulane.rundir import CONFIG_FILE, RunDir, run_env
from gpulane.session.sweep import session_for


def collect(run_dir: str | os.PathLike[str], wait: bool = True) -> int:
    path = Path(run_dir).resolve()
    if not (path / JOB_FILE).exists():
        raise InputError(f"{path}: no {JOB_FILE}; not a run submitted to Slurm by gpulane")
    if not (path / CONFIG_FILE).exists():
        raise InputError(f"{path}: no {CONFIG_FILE}; not a gpulane run directory")
    cfg = load_saved(path, SweepConfig)
    timeout_s = float(cfg.timeout_s or 300)
    launcher = SlurmLauncher.attach(path, settings(cfg), timeout_s)
    assert launcher.record is not None and launcher.waiter is not None
    if not wait and launcher.final_state() is None:
        state = launcher.waiter.poll_state()
        print(f"slurm job {launcher.record.job_id}: {state.lower()}; rows so far in {path}")
        return 0
    run = RunDir(str(cfg.run_id), path, str(cfg.build))
    world, device = int(cfg.world_size or 1), str(cfg.device or "cpu")
    env = run_env(cfg)
    session = session_for(cfg, run, env, world, device)
    spec = LaunchSpec(path, world, env, timeout_s, job="-", run_id=run.run_id)
    return session.run_launch(launcher, spec, attach=True)
