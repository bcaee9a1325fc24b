"""``gpulane collect RUN_DIR``: pick up a run started with ``launcher.wait=false``: the
launcher that started it (named in its saved configuration) follows it again
(:meth:`Launcher.attach`); wait for it (or say its state), show its table, write the
error row if it failed and the Parquet copy."""

from __future__ import annotations

import os
from pathlib import Path

from gpulane.config.commands import SweepConfig
from gpulane.config.load import load_saved
from gpulane.errors import InputError
from gpulane.launch.base import LaunchSpec
from gpulane.launch.registry import discover, entry, launcher_config
from gpulane.rundir import CONFIG_FILE, RunDir, run_env
from gpulane.session.sweep import session_for


def collect(run_dir: str | os.PathLike[str], wait: bool = True) -> int:
    path = Path(run_dir).resolve()
    if not (path / CONFIG_FILE).exists():
        raise InputError(f"{path}: no {CONFIG_FILE}; not a gpulane run directory")
    discover()  # a plugin's configuration class, to read the saved launcher.* with
    cfg = load_saved(path, SweepConfig)
    timeout_s = float(cfg.timeout_s or 300)
    launcher = entry(launcher_config(cfg).name).launcher.attach(path, cfg, timeout_s)
    if not wait:
        state = launcher.pending()
        if state is not None:
            print(f"{state}; rows so far in {path}")
            return 0
    run = RunDir(str(cfg.run_id), path, str(cfg.build))
    world, device = int(cfg.world_size or 1), str(cfg.device or "cpu")
    env = run_env(cfg)
    session = session_for(cfg, run, env, world, device)
    spec = LaunchSpec(path, world, env, timeout_s, job="-", run_id=run.run_id)
    return session.run_launch(launcher, spec, attach=True)
