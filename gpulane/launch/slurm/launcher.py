"""Slurm launcher: one job through submitit, one rank per GPU (or per task on CPUs).

:meth:`SlurmLauncher.start` submits the job (its record, ``slurm.json``, goes into the run
directory, which must be on a filesystem the nodes share); :meth:`poll` follows its state
(queued, running, ended) and the ranks' heartbeats. When the job fails, is cancelled, times
out or loses a node, the result names the job, the task and the node, with the tail of
that task's stderr. ``launcher.wait=false`` submits and leaves the job running;
:meth:`attach` picks it up again later (``gpulane collect RUN_DIR``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from gpulane.config.launcher import LauncherConfig, SlurmLauncherConfig
from gpulane.errors import InputError, RunFailed
from gpulane.launch.base import Launcher, LaunchPlan, LaunchResult, LaunchSpec, PackedLaunch
from gpulane.launch.registry import register_launcher
from gpulane.launch.slurm.diagnose import TaskFailure, diagnose, lost_nodes, state_words
from gpulane.launch.slurm.monitor import (
    FINAL_STATES,
    JOB_FILE,
    QUEUED_STATES,
    JobRecord,
    Waiter,
    wait_until_gone,
)
from gpulane.launch.slurm.settings import (
    SlurmSettings,
    element_settings,
    executor_parameters,
    for_mpi,
    hydra_launcher_keys,
    make_executor,
    partition_nodes,
    sbatch_options,
    settings,
)
from gpulane.launch.slurm.task import program_task, slurm_task
from gpulane.rank import expand_hostlist
from gpulane.rundir import read_heartbeats, read_rank_errors


@register_launcher("slurm", SlurmLauncherConfig)
class SlurmLauncher(Launcher):
    name = "slurm"

    @classmethod
    def from_config(
        cls, cfg: Any, config: LauncherConfig, device: str, needs_mpi: bool
    ) -> Launcher:
        return cls(settings(cfg, needs_mpi=needs_mpi), device)

    @classmethod
    def for_nodes(
        cls, cfg: Any, config: LauncherConfig, device: str, nodes: list[str], prepared: Any
    ) -> Launcher:
        if isinstance(prepared, LaunchPlan):
            prepared = prepared.settings
        s = prepared if isinstance(prepared, SlurmSettings) else settings(cfg, needs_mpi=True)
        return cls(element_settings(s, len(nodes)), device)

    # -- the hooks of a launcher whose ranks are on other hosts ---------------------------
    @classmethod
    def prepare(cls, cfg: Any, config: LauncherConfig, needs_mpi: bool | None) -> LaunchPlan:
        s = settings(cfg, needs_mpi=needs_mpi)
        return LaunchPlan("slurm", s.nodes, s.tasks_per_node, s.gpus_per_node, s.wait, s.poll_s, s)

    @classmethod
    def from_plan(cls, plan: LaunchPlan, device: str) -> Launcher:
        return cls(for_mpi(plan.settings), device)

    @classmethod
    def array_settings(cls, plan: LaunchPlan) -> dict[str, Any]:
        return hydra_launcher_keys(plan.settings)

    @classmethod
    def campaign_nodes(cls, plan: LaunchPlan) -> list[str]:
        return partition_nodes(plan.settings.partition)

    @classmethod
    def lost_nodes(cls, plan: LaunchPlan, nodes: list[str]) -> dict[str, str]:
        return lost_nodes(nodes)

    @classmethod
    def attach(cls, run_dir: Path, cfg: Any, timeout_s: float) -> Launcher:
        """The launcher of a job submitted earlier (``gpulane collect``)."""
        import submitit

        if not (run_dir / JOB_FILE).exists():
            raise InputError(f"{run_dir}: no {JOB_FILE}; not a run submitted to Slurm by gpulane")
        record = JobRecord.load(run_dir.resolve())
        job: Any = submitit.SlurmJob(
            folder=record.folder, job_id=record.job_id, tasks=tuple(range(record.tasks))
        )
        return cls.adopt(settings(cfg), job, record, run_dir, timeout_s)

    @property
    def job_id(self) -> str | None:
        return self.record.job_id if self.record is not None else None

    @property
    def job_state(self) -> str | None:
        return str(self.record.state) if self.record is not None else None

    def pending(self) -> str | None:
        if self.final_state() is not None:
            return None
        assert self.record is not None and self.waiter is not None
        return f"slurm job {self.record.job_id}: {self.waiter.poll_state().lower()}"

    def would_start(self, spec: LaunchSpec) -> str:
        params = executor_parameters(self.settings, f"gpulane-{spec.run_id}")
        if spec.hosts:
            params["slurm_nodelist"] = ",".join(spec.hosts)
        # submitit makes its folder: a scratch one, as nothing is submitted
        with tempfile.TemporaryDirectory(prefix="gpulane-dry-run-") as scratch:
            return "sbatch " + " ".join(sbatch_options(Path(scratch), params))

    def pack(self, specs: list[LaunchSpec], labels: list[str]) -> PackedLaunch:
        from gpulane.launch.slurm.packing import submit_packed

        return submit_packed(self.settings, specs, labels, type(self).adopt)

    def lone_rank_warning(self) -> str | None:
        return (
            "1 rank in this Slurm job: a collective of one rank moves nothing "
            "(busbw 0); ask for several with launcher.tasks_per_node=N (CPU nodes), "
            "launcher.gpus_per_node=N or launcher.nodes=N"
        )

    def __init__(self, settings: SlurmSettings, device: str = "cpu") -> None:
        self.settings = settings
        self.device = device
        self.job: Any = None
        self.record: JobRecord | None = None
        self.waiter: Waiter | None = None
        self.run_dir: Path | None = None
        self.result: LaunchResult | None = None
        self._notes: list[str] = []
        self.backend = "unknown"  # for the words of the error row

    # -- Launcher ------------------------------------------------------------------------
    def check(self, spec: LaunchSpec) -> None:
        s = self.settings
        if self.device == "cuda" and s.gpus_per_node and s.tasks_per_node > s.gpus_per_node:
            raise InputError(
                f"launcher.tasks_per_node={s.tasks_per_node} is more than gpus_per_node="
                f"{s.gpus_per_node}: one rank per GPU at most"
            )

    def describe(self, spec: LaunchSpec) -> str:
        s = self.settings
        where = f", partition {s.partition}" if s.partition else ""
        return f"{s.nodes} node(s) x {s.tasks_per_node} {self.device} ranks{where}"

    @property
    def poll_s(self) -> float:
        return self.settings.poll_s

    @property
    def detached(self) -> bool:
        return not self.settings.wait

    def start(self, spec: LaunchSpec) -> None:
        s = self.settings
        run_path = spec.run_dir.resolve()
        self.run_dir = run_path
        params = executor_parameters(s, f"gpulane-{spec.run_id}")
        if spec.hosts:
            params["slurm_nodelist"] = ",".join(spec.hosts)
        executor = make_executor(run_path / s.folder / "%j", params)
        fn: Any
        args: tuple[Any, ...]
        if spec.program is not None:
            fn, args = program_task, (list(spec.program), str(run_path), dict(spec.env))
        else:
            fn, args = slurm_task, (str(spec.job), str(run_path), dict(spec.env), s.startup_s)
        try:
            self.job = executor.submit(fn, *args)
        except Exception as err:  # sbatch's own words
            words = str(err).strip().splitlines()
            raise RunFailed(
                "sbatch refused the job: " + (" ".join(words[-3:]) if words else type(err).__name__)
            ) from err
        self.record = JobRecord(
            job_id=str(self.job.job_id),
            folder=str(run_path / s.folder / "%j"),
            tasks=spec.nprocs,
            nodes=s.nodes,
            tasks_per_node=s.tasks_per_node,
        )
        self.record.save(run_path)
        self._watch(spec.timeout_s)
        if self.detached:
            self._notes += [
                f"submitted slurm job {self.record.job_id}",
                f"run directory: {run_path}",
                f"collect with: gpulane collect {run_path}",
            ]

    def _watch(self, timeout_s: float) -> None:
        assert self.record is not None and self.run_dir is not None
        self.waiter = Waiter(
            self.job,
            self.record,
            self.run_dir,
            self.settings.poll_s,
            timeout_s,
            self.settings.startup_s,
            lambda: None,
            self._notes.append,
        )

    @classmethod
    def adopt(
        cls, settings: SlurmSettings, job: Any, record: JobRecord, run_dir: Path, timeout_s: float
    ) -> SlurmLauncher:
        """The launcher of a job someone else submitted (a packed job's combinations)."""
        launcher = cls(settings)
        launcher.run_dir = run_dir.resolve()
        launcher.record = record
        launcher.job = job
        launcher._watch(timeout_s)
        return launcher

    def conclude(self, state: str, stall: str | None, nodelist: str) -> LaunchResult:
        """The result for a final ``state`` another watcher saw (a packed job)."""
        assert self.waiter is not None
        self.waiter.stall, self.waiter.nodelist = stall, nodelist
        self.result = self._conclude(state)
        return self.result

    def final_state(self) -> str | None:
        """The job's state now when it has ended (without waiting), else None."""
        assert self.record is not None and self.waiter is not None
        if self.record.state in FINAL_STATES:
            return self.record.state
        state = self.waiter.poll_state()
        return state if state in FINAL_STATES else None

    def poll(self) -> LaunchResult | None:
        if self.result is not None:
            return self.result
        assert self.waiter is not None and self.record is not None
        if self.record.state in FINAL_STATES:  # collected again after the end
            state = self.record.state
        else:
            stepped = self.waiter.step()
            if stepped is None:
                return None
            state = stepped
        self.result = self._conclude(state)
        return self.result

    def state(self) -> str:
        if self.waiter is None:
            return "submitting"
        shown = self.waiter._shown
        if shown in QUEUED_STATES:
            return "queued"
        if shown == "RUNNING":
            return f"running on {self.waiter.nodelist}" if self.waiter.nodelist else "running"
        return shown.lower() or "submitted"

    def notes(self) -> list[str]:
        # Cleared in place: the job's waiter holds this very list's append.
        out = list(self._notes)
        self._notes.clear()
        return out

    def cancel(self) -> None:
        if self.job is None or self.record is None:
            return
        if self.record.state in FINAL_STATES and self.result is not None:
            return
        self.job.cancel(check=False)
        wait_until_gone(self.record.job_id)

    def interrupted(self, what: str) -> LaunchResult:
        assert self.record is not None
        f = TaskFailure(0, None, f"by the front ({what}); rows so far are kept", "")
        return self._result("CANCELLED", f, f"{what}: slurm job {self.record.job_id} cancelled")

    def on_reported(self) -> None:
        assert self.record is not None and self.run_dir is not None
        self.record.error_written = True
        self.record.save(self.run_dir)

    # -- the end of a job ----------------------------------------------------------------
    def _conclude(self, state: str) -> LaunchResult:
        """After the job: the failure in words (naming the task and node) when it failed,
        and the record's final state."""
        assert self.waiter is not None and self.record is not None and self.run_dir is not None
        record, run_path = self.record, self.run_dir
        stall = self.waiter.stall
        if state == "STALLED" and stall is None:
            stall = "no progress"
        if stall is not None or state != "COMPLETED":
            wait_until_gone(record.job_id)
        if stall is not None:
            beats = read_heartbeats(run_path)
            first = sorted(beats)[0] if beats else 0
            host = beats[first].host if first in beats else None
            f = TaskFailure(first, host, f"stalled: {stall}", "")
            result = self._result("CANCELLED", f, f"slurm job {record.job_id}: {stall}")
        elif state == "NODE_FAIL":
            result = self._node_fail()
        elif state != "COMPLETED":
            f = diagnose(
                self.job, record.tasks, record.tasks_per_node, run_path, self.waiter.nodelist
            )
            result = self._result(state, f, None)
        else:
            result = LaunchResult(dict.fromkeys(range(record.tasks), 0))
            record.state = state
            record.save(run_path)
        errors = read_rank_errors(run_path)
        if errors:
            # Every rank raised the same bad-input error; the session shows it once.
            result.user_error = errors[min(errors)]
        return result

    def _node_fail(self) -> LaunchResult:
        """NODE_FAIL: the node Slurm lost (sinfo says which, and why), not a task."""
        assert self.waiter is not None and self.record is not None and self.run_dir is not None
        record = self.record
        hosts = expand_hostlist(self.waiter.nodelist) if self.waiter.nodelist else []
        lost = lost_nodes(hosts)
        f = diagnose(self.job, record.tasks, record.tasks_per_node, self.run_dir, ",".join(hosts))
        if lost:
            node = next(iter(lost))
            first = hosts.index(node) * max(record.tasks_per_node, 1) if node in hosts else 0
            f = TaskFailure(first, node, f"ran on a node Slurm lost: {lost[node]}", "")
        result = self._result("NODE_FAIL", f, None)
        result.details["lost_nodes"] = lost
        return result

    def _result(self, state: str, f: TaskFailure, failure: str | None) -> LaunchResult:
        assert self.record is not None and self.run_dir is not None
        record = self.record
        words = (
            f"slurm job {record.job_id} {state_words(state)}: task {f.task}"
            f"{f' on {f.node}' if f.node else ''} {f.reason}"
        )
        row_error = words
        if f.stderr_tail:
            short = "\n".join(f.stderr_tail.splitlines()[-8:])
            row_error += (
                f"\n--- stderr of task {f.task} (last lines; all in extra.stderr_tail) ---\n{short}"
            )
        reported = record.error_written
        record.state = state
        record.save(self.run_dir)
        return LaunchResult(
            dict.fromkeys(range(record.tasks)),
            failure or words,
            [f.task],
            host=f.node,
            row_error=row_error,
            reported=reported,
            details={
                "slurm_job": record.job_id,
                "slurm_state": state,
                "task": f.task,
                "node": f.node,
                "stderr_tail": f.stderr_tail,
                "launcher": "slurm",
                "nodes": record.nodes,
                "world_size": record.tasks,
            },
        )

    def logs_note(self) -> str | None:
        if self.record is None:
            return None
        return f"slurm logs: {self.record.folder.replace('%j', self.record.job_id)}"
