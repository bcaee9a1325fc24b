"""mpirun launcher: ranks started by Open MPI's mpirun (or MPICH's / Intel MPI's mpiexec).

Each rank runs ``python -m gpulane.launch.worker`` (or the program given); its output goes
to ``<run>/logs/rank-N.log`` as under the local launcher, mpirun's own to
``<run>/logs/mpirun.log``. The watchdog reads the ranks' heartbeats and ends the job when
no rank makes progress for ``timeout_s``; when mpirun ends early the result names the rank
that failed first and its last words.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gpulane.config.backend import BackendConfig
from gpulane.config.launcher import LauncherConfig, MpirunLauncherConfig
from gpulane.errors import InputError
from gpulane.launch.base import Launcher, LaunchResult, LaunchSpec, log_path
from gpulane.launch.mpirun.command import (
    all_local,
    build_command,
    check_mpi4py,
    export_names,
    find_mpirun,
    is_root,
    mpirun_flavor,
    physical_cores,
    probe_mpi4py,
    rank_env,
)
from gpulane.launch.mpirun.failure import MPIRUN_LOG, describe_failure, stop
from gpulane.launch.registry import register_launcher
from gpulane.launch.watchdog import OutputWatch, find_stall
from gpulane.launch.worker import command as worker_command
from gpulane.rank import free_port
from gpulane.rundir import LOG_DIR, read_rank_errors


@dataclass
class MpirunSettings(MpirunLauncherConfig):
    """``launcher.*`` of launcher=mpirun (its keys are :class:`MpirunLauncherConfig`'s),
    and whether the ranks import mpi4py."""

    needs_mpi4py: bool = False  # the ranks import mpi4py: check it loads under this mpirun


@register_launcher("mpirun", MpirunLauncherConfig)
class MpirunLauncher(Launcher):
    name = "mpirun"

    @classmethod
    def from_config(
        cls, cfg: Any, config: LauncherConfig, device: str, needs_mpi: bool
    ) -> Launcher:
        assert isinstance(config, MpirunLauncherConfig)
        backend = getattr(cfg, "backend", None)
        return cls(
            MpirunSettings(
                command=str(config.command or "mpirun"),
                hostfile=str(config.hostfile) if config.hostfile else None,
                extra_args=[str(a) for a in config.extra_args or []],
                needs_mpi4py=needs_mpi and isinstance(backend, BackendConfig) and backend.needs_mpi,
            )
        )

    @classmethod
    def for_nodes(
        cls, cfg: Any, config: LauncherConfig, device: str, nodes: list[str], prepared: Any
    ) -> Launcher:
        return cls.from_config(cfg, config, device, needs_mpi=True)

    @property
    def on_this_host(self) -> bool:
        return not self.settings.hostfile

    def __init__(self, settings: MpirunSettings) -> None:
        self.settings = settings
        self.exe = ""
        self.flavor = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.mlog: IO[bytes] | None = None
        self.spec: LaunchSpec | None = None
        self.started = 0.0
        self.output: OutputWatch | None = None
        self.result: LaunchResult | None = None
        self.cmd: list[str] = []

    def check(self, spec: LaunchSpec) -> None:
        s = self.settings
        self.exe = find_mpirun(s.command)
        self.flavor = mpirun_flavor(self.exe)
        if s.hostfile and not Path(s.hostfile).is_file():
            raise InputError(f"launcher.hostfile: {s.hostfile} is not a file")
        if any(a in ("-np", "-n", "--np", "-c") for a in s.extra_args):
            raise InputError(
                "launcher.extra_args: leave the rank count out; gpulane passes -np from ranks="
            )
        if s.needs_mpi4py:
            env = rank_env(os.environ, spec.env, spec.run_id)
            check_mpi4py(probe_mpi4py(sys.executable, env), self.flavor, self.exe)

    def describe(self, spec: LaunchSpec) -> str:
        return f"{spec.nprocs} ranks under {self.flavor}'s {Path(self.exe).name}"

    def command_line(self, spec: LaunchSpec) -> list[str]:
        return list(self.cmd) or super().command_line(spec)

    def start(self, spec: LaunchSpec) -> None:
        s = self.settings
        self.spec = spec
        extra = list(s.extra_args)
        if spec.hosts:
            extra += ["--host", ",".join(spec.hosts)]
        child_env = rank_env(os.environ, spec.env, spec.run_id)
        local = all_local(s.hostfile, extra, child_env)
        if local and "MASTER_ADDR" not in child_env:
            # For backends that rendezvous over TCP (torch): every rank is on this host.
            child_env["MASTER_ADDR"] = "127.0.0.1"
            child_env["MASTER_PORT"] = str(free_port())
        log_dir = spec.run_dir / LOG_DIR
        log_dir.mkdir(parents=True, exist_ok=True)
        argv = spec.program or worker_command(str(spec.job), spec.run_dir)
        cmd = build_command(
            self.exe,
            self.flavor,
            spec.nprocs,
            argv,
            log_dir,
            export_names(child_env, list(spec.env)),
            hostfile=s.hostfile,
            extra_args=extra,
            root=is_root(),
            oversubscribe=local and spec.nprocs > physical_cores(),
        )
        (log_dir / "mpirun.cmd").write_text(shlex.join(cmd) + "\n")
        self.cmd = cmd
        self.mlog = open(log_dir / MPIRUN_LOG, "wb")  # noqa: SIM115 - closed in _end
        self.proc = subprocess.Popen(
            cmd,
            env=child_env,
            stdout=self.mlog,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        if spec.program is not None:
            self.output = OutputWatch(log_path(spec.run_dir, 0), spec.timeout_s)
        self.started = time.monotonic()

    def poll(self) -> LaunchResult | None:
        if self.result is not None:
            return self.result
        spec, proc = self.spec, self.proc
        assert spec is not None and proc is not None, "poll before start"
        code = proc.poll()
        if code is not None:
            codes: dict[int, int | None] = dict.fromkeys(range(spec.nprocs), code)
            if code == 0:
                return self._end(LaunchResult(codes))
            message, ranks, where = describe_failure(spec.run_dir, spec.nprocs, code)
            errors = read_rank_errors(spec.run_dir)
            # Bad input a rank found (every rank says the same): shown as it is, with its
            # status. Any other rank error stays in the launcher's account, which names the
            # rank and where it was.
            bad_input = {r: e for r, e in errors.items() if e[0] == 2}
            user_error = bad_input[min(bad_input)] if bad_input else None
            return self._end(LaunchResult(codes, message, ranks, where, user_error))
        if self.output is not None:
            stalled = self.output.stalled()
        else:
            stalled = find_stall(
                spec.run_dir, spec.nprocs, self.started, spec.timeout_s, spec.startup_s
            )
        if stalled is not None:
            stop(proc)
            message, ranks, label = stalled
            codes = dict.fromkeys(range(spec.nprocs), proc.poll())
            return self._end(LaunchResult(codes, message, ranks, label, timed_out=True))
        return None

    def cancel(self) -> None:
        if self.proc is not None:
            stop(self.proc)
        if self.mlog is not None:
            self.mlog.close()

    def _end(self, result: LaunchResult) -> LaunchResult:
        self.cancel()
        self.result = result
        return result
