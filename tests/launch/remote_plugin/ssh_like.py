"""A remote launcher from outside gpulane, as a Kubernetes or ssh launcher would be added:
this module, its YAML beside it, and ``$GPULANE_PLUGINS=tests.launch.remote_plugin.ssh_like``.
No file of gpulane knows it.

Its ranks run on OTHER hosts: here the network-namespace nodes that scripts/slurm-up.sh
brings up (n1, n2, each with its own address on the bridge). The per-host starter is plain
and ssh-like: one process per rank, ``ip netns exec gpl-<host> unshare --uts`` (the host's
network, and its name as the host name) running ``python3 -m gpulane.launch.worker``, with
MASTER_ADDR the first host's address. Each rank's exit status goes to a file in the run
directory, so that a run left going (``launcher.wait=false``) is followed again by
``gpulane collect`` from another process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.config.launcher import LauncherConfig
from gpulane.errors import InputError
from gpulane.launch.base import (
    Launcher,
    LaunchPlan,
    LaunchResult,
    LaunchSpec,
    describe_exit,
    log_path,
    tail,
)
from gpulane.launch.registry import register_launcher
from gpulane.launch.watchdog import find_stall
from gpulane.launch.worker import command as worker_command
from gpulane.rank import free_port
from gpulane.rundir import LOG_DIR, read_rank_errors

STATE_FILE = "ssh_like.json"  # what a later `gpulane collect` needs: hosts, process groups
EXIT_DIR = ".ssh_like"  # exit.<rank>: a rank's exit status, written by its starter


@dataclass
class SshLikeLauncherConfig(LauncherConfig):
    """Ranks on other hosts, started one process per rank by a per-host starter."""

    name: str = "ssh_like"
    """Internal: the option's name"""
    hosts: list[str] = field(default_factory=lambda: ["n1", "n2"])
    """The hosts of one run"""
    ranks_per_host: int = 1
    """Ranks on each host"""
    namespace: str = "gpl-{host}"
    """A host's network namespace ({host}: its name)"""
    interface: str = "gpl0"
    """The host's link inside its namespace (GLOO_SOCKET_IFNAME)"""
    wait: bool = True
    """false: start the ranks, print the run directory, return"""
    poll_s: float = 0.2
    """Seconds between polls"""

    @property
    def remote_world(self) -> bool:
        return True

    @property
    def places_on_nodes(self) -> bool:
        return True

    def validate(self) -> None:
        super().validate()
        if not self.hosts:
            raise InputError("launcher.hosts: name at least one host")
        if isinstance(self.ranks_per_host, bool) or int(self.ranks_per_host) < 1:
            raise InputError(f"launcher.ranks_per_host: expected >= 1, got {self.ranks_per_host}")


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def address(namespace: str, interface: str) -> str:
    """The host's address on its link (what the other hosts reach it at)."""
    out = subprocess.run(
        ["ip", "-n", namespace, "-o", "-4", "addr", "show", "dev", interface],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    words = out.stdout.split()
    if out.returncode != 0 or "inet" not in words:
        raise InputError(f"launcher=ssh_like: no address on {interface} in {namespace}")
    return words[words.index("inet") + 1].split("/")[0]


@register_launcher(
    "ssh_like", SshLikeLauncherConfig, yaml=Path(__file__).with_name("ssh_like.yaml")
)
class SshLikeLauncher(Launcher):
    def __init__(self, hosts: list[str], config: SshLikeLauncherConfig) -> None:
        self.hosts = list(hosts)
        self.config = config
        self.spec: LaunchSpec | None = None
        self.run_dir: Path | None = None
        self.nprocs = 0
        self.pgids: dict[int, int] = {}
        self.rank_hosts: dict[int, str] = {}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.started = time.monotonic()
        self.result: LaunchResult | None = None
        self._notes: list[str] = []

    # -- the remote-launcher hooks ------------------------------------------------------
    @classmethod
    def prepare(cls, cfg: Any, config: LauncherConfig, needs_mpi: bool | None) -> LaunchPlan:
        assert isinstance(config, SshLikeLauncherConfig)
        config.validate()
        missing = [h for h in config.hosts if config.namespace.format(host=h) not in namespaces()]
        if missing:
            raise InputError(f"launcher=ssh_like: no such host {', '.join(missing)}")
        hosts, per = list(config.hosts), int(config.ranks_per_host)
        return LaunchPlan("ssh_like", len(hosts), per, None, config.wait, config.poll_s, config)

    @classmethod
    def from_plan(cls, plan: LaunchPlan, device: str) -> Launcher:
        return cls(plan.settings.hosts, plan.settings)

    @classmethod
    def for_nodes(
        cls, cfg: Any, config: LauncherConfig, device: str, nodes: list[str], prepared: Any
    ) -> Launcher:
        assert isinstance(config, SshLikeLauncherConfig)
        return cls(nodes, prepared.settings if isinstance(prepared, LaunchPlan) else config)

    @classmethod
    def campaign_nodes(cls, plan: LaunchPlan) -> list[str]:
        return list(plan.settings.hosts)

    @classmethod
    def lost_nodes(cls, plan: LaunchPlan, nodes: list[str]) -> dict[str, str]:
        known = namespaces()
        fmt = plan.settings.namespace
        return {n: "its namespace is gone" for n in nodes if fmt.format(host=n) not in known}

    @classmethod
    def attach(cls, run_dir: Path, cfg: Any, timeout_s: float) -> Launcher:
        state = run_dir / STATE_FILE
        if not state.exists():
            raise InputError(f"{run_dir}: no {STATE_FILE}; not a run started by launcher=ssh_like")
        data = json.loads(state.read_text())
        config = SshLikeLauncherConfig(hosts=data["hosts"])
        launcher = cls(data["hosts"], config)
        launcher.run_dir, launcher.nprocs = run_dir, int(data["nprocs"])
        launcher.pgids = {int(k): v for k, v in data["pgids"].items()}
        launcher.rank_hosts = {int(k): v for k, v in data["rank_hosts"].items()}
        return launcher

    def pending(self) -> str | None:
        codes = self._codes()
        if all(c is not None for c in codes.values()):
            return None
        going = sum(c is None for c in codes.values())
        return f"ssh_like: {going} of {self.nprocs} ranks running on {','.join(self.hosts)}"

    def would_start(self, spec: LaunchSpec) -> str:
        hosts = spec.hosts or self.hosts
        return " ".join(self._argv(hosts[0], spec, 0))

    # -- starting and following ---------------------------------------------------------
    def describe(self, spec: LaunchSpec) -> str:
        hosts = spec.hosts or self.hosts
        return f"{spec.nprocs} ranks on {','.join(hosts)} (ssh_like: ip netns exec per host)"

    @property
    def detached(self) -> bool:
        return not self.config.wait

    @property
    def poll_s(self) -> float:
        return float(self.config.poll_s)

    def _argv(self, host: str, spec: LaunchSpec, rank: int) -> list[str]:
        """The per-host starter: the host's network and name, the worker, its exit status."""
        # sh takes the host's name, runs the rank, and leaves its exit status where a
        # later process (gpulane collect) reads it: $GPULANE_EXIT_FILE, set in start()
        script = 'hostname "$0"; "$@"; echo $? > "$GPULANE_EXIT_FILE"'
        return [
            "ip", "netns", "exec", self.config.namespace.format(host=host),
            "unshare", "--uts", "sh", "-c", script, host,
            *worker_command(str(spec.job), spec.run_dir),
        ]  # fmt: skip

    def start(self, spec: LaunchSpec) -> None:
        hosts = spec.hosts or self.hosts
        per = max(1, spec.nprocs // len(hosts))
        self.spec, self.run_dir, self.nprocs = spec, spec.run_dir, spec.nprocs
        (spec.run_dir / LOG_DIR).mkdir(parents=True, exist_ok=True)
        (spec.run_dir / EXIT_DIR).mkdir(parents=True, exist_ok=True)
        ns0 = self.config.namespace.format(host=hosts[0])
        master, port = address(ns0, self.config.interface), free_port()
        for rank in range(spec.nprocs):
            host = hosts[min(rank // per, len(hosts) - 1)]
            env = {
                **os.environ,
                **spec.env,
                "RANK": str(rank),
                "WORLD_SIZE": str(spec.nprocs),
                "LOCAL_RANK": str(rank % per),
                "LOCAL_WORLD_SIZE": str(per),
                "MASTER_ADDR": master,
                "MASTER_PORT": str(port),
                "GPULANE_LAUNCHER": "ssh_like",
                "GLOO_SOCKET_IFNAME": self.config.interface,
                "GPULANE_EXIT_FILE": str(spec.run_dir / EXIT_DIR / f"exit.{rank}"),
                "PYTHONUNBUFFERED": "1",
            }
            with open(log_path(spec.run_dir, rank), "wb") as log:
                proc = subprocess.Popen(
                    self._argv(host, spec, rank), env=env, stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                )  # fmt: skip
            self.procs[rank], self.pgids[rank], self.rank_hosts[rank] = proc, proc.pid, host
        state = {"hosts": hosts, "nprocs": spec.nprocs, "pgids": self.pgids,
                 "rank_hosts": self.rank_hosts, "master": f"{master}:{port}"}  # fmt: skip
        (spec.run_dir / STATE_FILE).write_text(json.dumps(state) + "\n")
        self.started = time.monotonic()
        if self.detached:
            self._notes += [
                f"started {spec.nprocs} ranks on {','.join(hosts)}",
                f"run directory: {spec.run_dir}",
                f"collect with: gpulane collect {spec.run_dir}",
            ]

    def _codes(self) -> dict[int, int | None]:
        assert self.run_dir is not None
        for proc in self.procs.values():
            proc.poll()  # reap the starters this process started
        codes: dict[int, int | None] = {}
        for rank in range(self.nprocs):
            with contextlib.suppress(OSError, ValueError):
                codes[rank] = int((self.run_dir / EXIT_DIR / f"exit.{rank}").read_text())
                continue
            codes[rank] = None
        return codes

    def poll(self) -> LaunchResult | None:
        if self.result is not None:
            return self.result
        assert self.run_dir is not None
        codes = self._codes()
        failed = {r: c for r, c in codes.items() if c not in (None, 0)}
        if failed:
            rank = min(failed)
            self.cancel()
            host = self.rank_hosts.get(rank)
            words = f"rank {rank} on {host} {describe_exit(int(failed[rank]))}"
            last = tail(log_path(self.run_dir, rank))
            result = LaunchResult(codes, words + (f": {last}" if last else ""), [rank], host=host)
        elif all(c == 0 for c in codes.values()):
            result = LaunchResult(codes)
        else:
            spec = self.spec
            stall = (
                find_stall(self.run_dir, self.nprocs, self.started, spec.timeout_s, spec.startup_s)
                if spec is not None
                else None
            )
            if stall is None:
                return None
            self.cancel()
            result = LaunchResult(codes, stall[0], list(stall[1]), stalled_at=stall[2])
        errors = read_rank_errors(self.run_dir)
        if errors:
            result.user_error = errors[min(errors)]
        self.result = result
        return result

    def state(self) -> str:
        return f"running on {','.join(self.hosts)}"

    def notes(self) -> list[str]:
        out, self._notes = self._notes, []
        return out

    def cancel(self) -> None:
        for pgid in self.pgids.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
