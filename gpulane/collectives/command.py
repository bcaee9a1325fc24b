"""`gpulane sweep`: plan, launch the ranks, show the table, keep the rows."""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gpulane.collectives.plan import build_plan, rounding_notes
from gpulane.collectives.table import RowTail, SweepTable, print_run_header
from gpulane.errors import InputError, MissingComponent, RunFailed
from gpulane.hydra_app import comma_lists, run_hydra
from gpulane.launch.context import make_context
from gpulane.launch.env import discover
from gpulane.launch.local import launch_local
from gpulane.launch.worker import CONFIG_FILE
from gpulane.record import Row
from gpulane.runs import (
    RunDir,
    Terminated,
    disk_note,
    make_run_dir,
    run_env,
    save_config,
    sigterm_as_exception,
)

JOB = "gpulane.collectives.sweep:run_rank"


# Keys that take several values in one run: `collectives=all_reduce,all_gather` means the
# list (outside -m, where Hydra reads a comma list as a sweep).
LIST_KEYS = frozenset({"collectives", "dtype"})


def main(argv: list[str]) -> int:
    return run_hydra("sweep", sweep, comma_lists(argv, LIST_KEYS), "gpulane sweep")


def local_gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def resolve_world(cfg: Any) -> tuple[int, str]:
    """(ranks, device) from ranks=auto|N and device=auto|cuda|cpu and the GPUs present."""
    device = str(cfg.device).lower()
    if device not in ("auto", "cuda", "cpu"):
        raise InputError(f"device: expected auto, cuda or cpu, got {cfg.device!r}")
    backend = str(cfg.backend.name)
    if backend in ("nccl", "nccl_tests") and device == "cpu":
        raise InputError(f"backend={backend} needs GPUs; use backend=torch or backend=mpi on CPUs")
    gpus = local_gpus() if device != "cpu" else 0
    ranks = cfg.ranks
    if device == "auto":
        wanted = gpus if str(ranks) == "auto" else int(ranks)
        device = "cuda" if gpus >= 1 and gpus >= wanted else "cpu"
        if device == "cpu" and backend == "nccl":
            raise MissingComponent("backend=nccl needs GPUs and torch sees none")
    if str(ranks) == "auto":
        n = gpus if device == "cuda" else 2
    else:
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise InputError(f"ranks: expected auto or a whole number >= 1, got {ranks!r}")
        n = ranks
    if device == "cuda":
        if gpus == 0:
            raise MissingComponent("device=cuda but no GPU is visible; use device=cpu")
        if n > gpus:
            raise InputError(
                f"ranks={n} but this host has {gpus} GPU(s); use ranks<={gpus} or device=cpu"
            )
    return n, device


def path_label(device: str, ranks: int) -> str | None:
    if device != "cuda":
        return None
    try:
        from gpulane.topology.live import worst_path_for_gpus
    except ImportError:
        return None
    try:
        return worst_path_for_gpus(list(range(ranks)))
    except Exception:
        return None


def resume(cfg: DictConfig) -> int:
    """Measure only what a run directory is missing, with that run's own configuration."""
    path = Path(str(cfg.resume))
    if not (path / CONFIG_FILE).is_file():
        raise InputError(f"resume: {path} is not a gpulane run directory (no {CONFIG_FILE})")
    saved = OmegaConf.load(path / CONFIG_FILE)
    assert isinstance(saved, DictConfig)
    saved.resume = True
    if str(saved.launcher.name) != "local" or str(saved.backend.name) == "nccl_tests":
        raise InputError("resume: only runs of the local launcher can be resumed here")
    run = RunDir(str(saved.run_id), path, str(saved.build))
    tmp = path / (CONFIG_FILE + ".tmp")
    OmegaConf.save(saved, tmp)  # the ranks read resume=true from here
    os.replace(tmp, path / CONFIG_FILE)
    plan = build_plan(saved, str(saved.device) == "cuda")
    print(f"# resuming {run.run_id}: {len(run.rows())} rows on disk", flush=True)
    return run_local(
        saved, run, run_env(saved), int(saved.world_size), plan.lines, len(plan.placements)
    )


def sweep(cfg: DictConfig) -> int:
    if cfg.get("resume"):
        return resume(cfg)
    backend = str(cfg.backend.name)
    info = discover()
    if info is not None and info.launcher != "gpulane":
        return _in_process(cfg, info)
    if str(cfg.launcher.name) == "slurm" and backend != "nccl_tests":
        # The GPUs are on the compute nodes, not here: the job itself resolves the world.
        from gpulane.launch.slurm import run_slurm

        build_plan(cfg, on_device=True)  # bad input stops here, before anything is queued
        run = make_run_dir(cfg)
        saved = save_config(cfg, run, nodes=int(cfg.launcher.nodes))
        return run_slurm(saved, run, run_env(cfg), JOB)
    ranks, device = resolve_world(cfg)
    plan = build_plan(cfg, device == "cuda")
    if plan.timing.graph and device != "cuda":
        raise InputError("graph: CUDA graphs need GPUs; set graph=false on CPUs")
    env = run_env(cfg)
    run = make_run_dir(cfg)
    saved = save_config(
        cfg, run, world_size=ranks, device=device, path=path_label(device, ranks), nodes=1
    )
    if backend == "nccl_tests":
        from gpulane.collectives.nccl_tests.runner import run_nccl_tests

        return run_nccl_tests(saved, run, env)
    launcher = str(cfg.launcher.name)
    if launcher == "mpirun":
        from gpulane.launch.mpirun import run_mpirun

        return run_mpirun(saved, run, env, JOB)
    if launcher != "local":
        raise InputError(f"launcher: unknown launcher {launcher!r}; use local, slurm or mpirun")
    for note in rounding_notes(plan, ranks):
        print(f"# note: {note}", flush=True)
    return run_local(saved, run, env, ranks, plan.lines, len(plan.placements))


def run_local(
    cfg: DictConfig, run: RunDir, env: dict[str, str], ranks: int, lines: int, placements: int
) -> int:
    print_run_header(
        f"{cfg.backend.name} on {ranks} {cfg.device} ranks", run.build, run.run_id, env
    )
    tail = RowTail(run.rows_path)
    table = SweepTable(lines, placements, progress=bool(cfg.progress) and sys.stdout.isatty())

    def poll() -> None:
        for row in tail.read():
            table.add(row)

    status = 0
    with table, sigterm_as_exception():
        try:
            result = launch_local(JOB, run.path, ranks, env, float(cfg.timeout_s), poll)
        except (KeyboardInterrupt, Terminated) as ex:
            poll()
            code = 143 if isinstance(ex, Terminated) else 130
            error_row(cfg, run, "interrupted" if code == 130 else "terminated (SIGTERM)", None)
            run.finish()
            table.print(
                f"# {'interrupted' if code == 130 else 'terminated'}: rows so far kept in {run.path}"
            )
            return code
        poll()
    if result.user_error is not None:
        code, message = result.user_error
        run.finish()
        sys.stderr.write(f"gpulane: error: {message}\n")
        return code
    if not result.ok:
        result.failure = (result.failure or "run failed") + disk_note(run.path)
        error_row(cfg, run, result.failure, result.stalled_at)
        status = RunFailed.exit_code
    return finish(cfg, run, status, result.failure)


def error_row(cfg: Any, run: RunDir, message: str, where: str | None) -> None:
    op = where.split()[0] if where and where not in ("started", "done") else "run"
    run.write_error(
        Row(
            run_id=run.run_id,
            kind="collective",
            backend=str(cfg.backend.name),
            op=op,
            build=run.build,
            world_size=int(cfg.world_size),
            status="error",
            error=message,
            extra={"at": where},
        )
    )


def finish(cfg: Any, run: RunDir, status: int, failure: str | None) -> int:
    rows = run.rows()
    run.finish()
    measured = [r for r in rows if r.get("time_us") is not None]
    wrong = [r for r in measured if (r.get("wrong") or 0) > 0]
    if measured:
        avg = statistics.fmean(r["busbw_gbps"] for r in measured)
        print(f"# Avg bus bandwidth    : {avg:.4f} GB/s over {len(measured)} rows")
    print(f"# rows: {run.rows_path} (and rows.parquet)")
    if failure:
        sys.stderr.write(f"gpulane: error: {failure}\n")
        status = max(status, RunFailed.exit_code)
    if wrong:
        where = ", ".join(
            f"{r['op']} {r['size_bytes']} B {'in-place' if r['in_place'] else 'out-of-place'}"
            f" ({r['wrong']})"
            for r in wrong[:5]
        )
        sys.stderr.write(f"gpulane: error: wrong results at {where}\n")
        status = max(status, RunFailed.exit_code)
    return status


def _in_process(cfg: DictConfig, info: Any) -> int:
    """Started by torchrun, srun or mpirun: this process is one rank; rank 0 prints."""
    from gpulane.collectives.sweep import run_rank
    from gpulane.launch.env import shared_run_id

    env = run_env(cfg)
    os.environ.update(env)
    run = make_run_dir(cfg, run_id=shared_run_id())
    saved = save_config(cfg, run, world_size=info.world_size, device=str(cfg.device), nodes=None)
    ctx = make_context(info, run.path)
    plan = build_plan(saved, str(cfg.device) != "cpu" and local_gpus() > 0)
    if ctx.is_leader:
        print(f"# gpulane sweep: rank 0 of {info.world_size} ({info.launcher}), run {run.run_id}")
        with SweepTable(plan.lines, len(plan.placements), progress=False) as table:
            run_rank(saved, ctx, on_row=lambda row: table.add(row.to_dict()))
        return finish(saved, run, 0, None)
    run_rank(saved, ctx)
    return 0
