"""Packed multiruns: ``launcher.pack=true`` under ``-m`` runs every combination one after
the other in ONE Slurm job (one allocation) instead of one job-array element each.

The multirun callback swaps hydra-submitit-launcher for Hydra's basic launcher, so every
combination comes to :func:`queue_packed` in this process (its run directory and
configuration are made, no job yet); when the sweep is over :func:`finish_packing` submits
one job whose tasks run the combinations in turn (:func:`gpulane.launch.slurm.task.
packed_task`), follows it, and concludes each combination as its own session would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.collectives.plan import build_plan
from gpulane.collectives.table import SweepView
from gpulane.config.capabilities import backend_of
from gpulane.config.commands import SweepConfig
from gpulane.errors import GpulaneError, InputError, RunFailed, print_error
from gpulane.launch.base import LaunchResult
from gpulane.launch.slurm.launcher import SlurmLauncher
from gpulane.launch.slurm.monitor import JobRecord, Waiter
from gpulane.launch.slurm.settings import SlurmSettings, executor_parameters, make_executor
from gpulane.launch.slurm.task import packed_done, packed_task
from gpulane.rundir import RunDir, make_run_dir, rank_env, run_env, save_config
from gpulane.session.run import RunSession, SessionSpec
from gpulane.session.signals import Terminated, sigterm_as_exception, stop_words
from gpulane.session.sweep import uses_nccl

JOB = "gpulane.collectives.sweep:run_rank"


@dataclass
class Packed:
    cfg: SweepConfig
    run: RunDir
    env: dict[str, str]
    settings: SlurmSettings
    label: str
    device: str
    job: str = JOB


_PACK: list[Packed] | None = None


def start_packing() -> None:
    global _PACK
    _PACK = []


def packing() -> bool:
    return _PACK is not None


def _overrides_label() -> str:
    try:
        from hydra.core.hydra_config import HydraConfig

        task = [str(o) for o in HydraConfig.get().overrides.task]
        return " ".join(o for o in task if not o.startswith(("launcher", "results_dir"))) or "-"
    except Exception:  # outside a Hydra job: no overrides to show
        return "-"


def queue_packed(
    cfg: SweepConfig, s: SlurmSettings, run: RunDir | None = None, job: str = JOB
) -> int:
    """One combination of a packed multirun: its run directory and configuration now, its
    job later (:func:`finish_packing`)."""
    assert _PACK is not None
    if backend_of(cfg).needs_mpi:
        raise InputError(
            f"launcher.pack=true: backend={cfg.backend.name} cannot be packed (MPI starts once per process)"
        )
    build_plan(cfg, on_device=True)  # bad input stops the combination now
    device = str(cfg.device or "auto")
    if device == "auto":
        device = "cuda" if s.gpus_per_node else "cpu"
    run = run or make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=s.world_size, nodes=s.nodes, device=device)
    label = _overrides_label()
    _PACK.append(Packed(saved, run, run_env(cfg), s, label, device, job))
    print(f"# packed #{len(_PACK)}: {label} -> {run.path}", flush=True)
    return 0


def finish_packing() -> int:
    """Submit the queued combinations as one job, wait, and conclude each one."""
    global _PACK
    items, _PACK = _PACK or [], None
    if not items:
        return 0
    try:
        return _run_packed(items)
    except GpulaneError as err:
        print_error(err)
        return err.exit_code


def _session(it: Packed) -> RunSession:
    plan = build_plan(it.cfg, it.device == "cuda")
    spec = SessionSpec(
        command="sweep",
        kind="collective",
        backend=str(it.cfg.backend.name),
        description=f"{it.cfg.backend.name} (packed)",
        world_size=it.settings.world_size,
    )
    return RunSession(it.run, spec, SweepView(plan.lines, len(plan.placements)), it.env, False)


def _run_packed(items: list[Packed]) -> int:
    s = items[0].settings
    for it in items[1:]:
        if it.settings != s:
            raise InputError(
                "launcher.pack=true runs every combination in one allocation: launcher.* "
                f"must be the same in all of them ({items[0].label!r} and {it.label!r} differ)"
            )
    first = items[0]
    paths = [Path(it.run.path).resolve() for it in items]
    work = [
        (it.job, str(p), rank_env(it.run.path, it.env, uses_nccl(it.cfg, it.device)))
        for it, p in zip(items, paths, strict=True)
    ]
    executor = make_executor(
        paths[0] / s.folder / "%j", executor_parameters(s, f"gpulane-{first.cfg.run_id}")
    )
    try:
        sjob = executor.submit(packed_task, work, s.startup_s)
    except Exception as err:  # sbatch's own words
        words = str(err).strip().splitlines()
        raise RunFailed("sbatch refused the job: " + " ".join(words[-3:])) from err
    timeout_s = float(first.cfg.timeout_s)
    launchers = []
    for p in paths:
        record = JobRecord(
            job_id=str(sjob.job_id),
            folder=str(paths[0] / s.folder / "%j"),
            tasks=s.world_size,
            nodes=s.nodes,
            tasks_per_node=s.tasks_per_node,
        )
        record.save(p)
        launchers.append(SlurmLauncher.adopt(s, sjob, record, p, timeout_s))
    print(
        f"# gpulane sweep: {len(items)} combinations packed into slurm job {sjob.job_id} "
        f"({s.nodes} node(s) x {s.tasks_per_node} ranks)",
        flush=True,
    )
    if not s.wait:
        for it, p in zip(items, paths, strict=True):
            print(f"run directory: {p}  ({it.label})")
        return 0
    state, waiter, stopped_at = _follow(items, paths, launchers, s, sjob)
    if state is None:
        return stopped_at  # the exit status of an interrupt
    return _conclude_all(items, launchers, state, waiter, stopped_at)


def _follow(
    items: list[Packed], paths: list[Path], launchers: list[SlurmLauncher], s: SlurmSettings,
    sjob: Any,
) -> tuple[str | None, Waiter, int]:  # fmt: skip
    """Wait for the packed job, moving the stall watch from combination to combination."""

    def active() -> int:
        done = (packed_done(p, s.world_size) for p in paths)
        return next((i for i, ok in enumerate(done) if not ok), len(paths))

    current = [0]
    records = [launcher.record for launcher in launchers]
    assert records[0] is not None
    waiter = Waiter(sjob, records[0], paths[0], s.poll_s, 0.0, s.startup_s, lambda: None, print)

    def on_poll() -> None:
        i = active()
        if i != current[0] and i < len(paths):
            current[0] = i
            waiter.run_dir = paths[i]
            waiter.running_since = None  # the next combination starts its own clock
            waiter.record = records[i]  # type: ignore[assignment]
            print(f"# packed #{i + 1} of {len(paths)}: {items[i].label}", flush=True)

    waiter.on_poll = on_poll
    print(f"# packed #1 of {len(paths)}: {items[0].label}", flush=True)
    waiter.timeout_s = float(items[0].cfg.timeout_s)
    with sigterm_as_exception():
        try:
            while (state := waiter.step()) is None:
                time.sleep(s.poll_s)
        except (KeyboardInterrupt, Terminated) as ex:
            sjob.cancel(check=False)
            code, _ = stop_words(ex)
            for it, p, launcher in zip(items, paths, launchers, strict=True):
                if not packed_done(p, s.world_size):
                    session = _session(it)
                    session.launcher = launcher
                    session.interrupt(ex)
            return None, waiter, code
    return state, waiter, active()


def _conclude_all(
    items: list[Packed], launchers: list[SlurmLauncher], state: str, waiter: Waiter,
    stopped_at: int,
) -> int:  # fmt: skip
    status = 0
    cause = ""
    for i, (it, launcher) in enumerate(zip(items, launchers, strict=True)):
        session = _session(it)
        session.launcher = launcher
        if i < stopped_at:
            result = launcher.conclude("COMPLETED", None, waiter.nodelist)
        elif i == stopped_at:
            final = "CANCELLED" if state == "STALLED" else state
            if final == "COMPLETED":  # every task returned, yet no mark: say so
                final = "FAILED"
            result = launcher.conclude(final, waiter.stall, waiter.nodelist)
            cause = f" ({result.failure})" if result.failure else ""
        else:
            why = f"not completed: the packed job ended at combination #{stopped_at + 1}{cause}"
            assert launcher.record is not None
            result = LaunchResult({}, f"slurm job {launcher.record.job_id}: {why}")
            result.details = {"slurm_job": launcher.record.job_id, "slurm_state": state}
        session.result = result
        print(f"# packed #{i + 1} of {len(items)}: {it.label}: {it.run.path}")
        status = max(status, session.finish())
    return status
