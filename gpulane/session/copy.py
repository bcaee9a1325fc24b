"""A copy run as a session: the settings checked here, then one rank on this host that
drives every GPU (host buffers on each GPU's NUMA node), its sections shown as they end."""

from __future__ import annotations

from gpulane.config.commands import CopyConfig
from gpulane.launch.base import LaunchSpec
from gpulane.launch.registry import host_launcher
from gpulane.rundir import make_run_dir, run_env, save_config
from gpulane.session.run import RunSession, SessionSpec
from gpulane.transfers.measure import load_torch
from gpulane.transfers.options import read_options
from gpulane.transfers.points import BACKEND
from gpulane.transfers.sizes import parse_gpus
from gpulane.transfers.view import CopyView

JOB = "gpulane.transfers.job:run_rank"


def run_copy(cfg: CopyConfig) -> int:
    launcher = host_launcher(cfg, "copies", "cuda")
    opts = read_options(cfg)
    count = int(load_torch().cuda.device_count())  # a clear error without a GPU
    gpus = parse_gpus(cfg.gpus, count)
    env = run_env(cfg)
    run = make_run_dir(cfg)
    save_config(cfg, run, world_size=len(gpus), nodes=1)
    spec = SessionSpec(
        command="copy",
        kind="copy",
        backend=BACKEND,
        description=f"{len(gpus)} GPU(s), {len(opts.sizes)} sizes",
        world_size=len(gpus),
    )
    session = RunSession(run, spec, CopyView(), env, progress=bool(cfg.progress))
    launch = LaunchSpec(run.path, 1, env, float(cfg.timeout_s), job=JOB, run_id=run.run_id)
    return session.run_launch(launcher, launch)
