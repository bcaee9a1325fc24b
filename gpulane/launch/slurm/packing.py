"""Packed multiruns on Slurm (``campaign.pack=true`` under ``-m``): every combination one
after the other in ONE job (one allocation), its tasks running them in turn
(:func:`gpulane.launch.slurm.task.packed_task`); the stall watch moves from combination to
combination, and each is concluded as its own job would be."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from gpulane.errors import RunFailed
from gpulane.launch.base import Launcher, LaunchResult, LaunchSpec, PackedLaunch
from gpulane.launch.slurm.monitor import JobRecord, Waiter
from gpulane.launch.slurm.settings import SlurmSettings, executor_parameters, make_executor
from gpulane.launch.slurm.task import packed_done, packed_task


class PackedJob(PackedLaunch):
    """``adopt``: SlurmLauncher.adopt, handed in by the launcher that packs (this module
    is its helper and does not import it back)."""

    def __init__(
        self,
        s: SlurmSettings,
        specs: list[LaunchSpec],
        labels: list[str],
        adopt: Callable[..., Any],
    ) -> None:
        self.s, self.specs, self.labels = s, specs, labels
        self.paths = [Path(spec.run_dir).resolve() for spec in specs]
        work = [
            (str(spec.job), str(p), dict(spec.env))
            for spec, p in zip(specs, self.paths, strict=True)
        ]
        folder = self.paths[0] / s.folder / "%j"
        executor = make_executor(folder, executor_parameters(s, f"gpulane-{specs[0].run_id}"))
        try:
            self.job: Any = executor.submit(packed_task, work, s.startup_s)
        except Exception as err:  # sbatch's own words
            words = str(err).strip().splitlines()
            raise RunFailed("sbatch refused the job: " + " ".join(words[-3:])) from err
        self.launchers: list[Launcher] = []
        self.slurm: list[Any] = []
        for spec, p in zip(specs, self.paths, strict=True):
            record = JobRecord(
                job_id=str(self.job.job_id),
                folder=str(folder),
                tasks=s.world_size,
                nodes=s.nodes,
                tasks_per_node=s.tasks_per_node,
            )
            record.save(p)
            launcher = adopt(s, self.job, record, p, spec.timeout_s)
            self.slurm.append(launcher)
            self.launchers.append(launcher)
        self.started = (
            f"# gpulane sweep: {len(specs)} combinations packed into slurm job {self.job.job_id} "
            f"({s.nodes} node(s) x {s.tasks_per_node} ranks)"
        )
        self.state: str | None = None
        self.stopped_at = 0
        records = [launcher.record for launcher in self.slurm]
        assert records[0] is not None
        self.records = records
        self.waiter = Waiter(
            self.job, records[0], self.paths[0], s.poll_s, specs[0].timeout_s, s.startup_s,
            lambda: None, partial(print, flush=True),
        )  # fmt: skip

    def active(self) -> int:
        done = (packed_done(p, self.s.world_size) for p in self.paths)
        return next((i for i, ok in enumerate(done) if not ok), len(self.paths))

    def follow(self) -> None:
        """Wait for the packed job, moving the stall watch from combination to combination."""
        current = [0]
        waiter, paths = self.waiter, self.paths

        def on_poll() -> None:
            i = self.active()
            if i != current[0] and i < len(paths):
                current[0] = i
                waiter.run_dir = paths[i]
                waiter.running_since = None  # the next combination starts its own clock
                waiter.record = self.records[i]
                waiter.timeout_s = self.specs[i].timeout_s
                waiter.say(f"# packed #{i + 1} of {len(paths)}: {self.labels[i]}")

        waiter.on_poll = on_poll
        waiter.say(f"# packed #1 of {len(paths)}: {self.labels[0]}")
        while (state := waiter.step()) is None:
            time.sleep(self.s.poll_s)
        self.state, self.stopped_at = state, self.active()

    def cancel(self) -> None:
        self.job.cancel(check=False)

    def unfinished(self) -> list[int]:
        return [i for i, p in enumerate(self.paths) if not packed_done(p, self.s.world_size)]

    def results(self) -> list[LaunchResult]:
        assert self.state is not None, "results before follow"
        state, waiter, stopped_at = self.state, self.waiter, self.stopped_at
        out: list[LaunchResult] = []
        cause = ""
        for i, launcher in enumerate(self.slurm):
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
            out.append(result)
        return out


def submit_packed(
    s: SlurmSettings, specs: list[LaunchSpec], labels: list[str], adopt: Callable[..., Any]
) -> PackedJob:
    return PackedJob(s, specs, labels, adopt)
