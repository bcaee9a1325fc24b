"""Progress where a person looks: on a terminal the live bar; in a log (stderr not a
terminal) a plain line about every 10 s with points done/total, elapsed and ETA; an
estimate before a long sweep; warnings before a run that oversubscribes the cores or a
Slurm collective run of one rank. Real sweeps for the log and the pseudo-terminal."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpulane.collectives.plan import build_plan
from gpulane.commands.hydra_app import compose_typed
from gpulane.config.commands import SweepConfig
from gpulane.launch.base import LaunchSpec
from gpulane.launch.local import LocalLauncher
from gpulane.launch.slurm.launcher import SlurmLauncher
from gpulane.launch.slurm.settings import SlurmSettings
from gpulane.session.estimate import sweep_estimate_s
from gpulane.session.live import LogProgress, clock
from gpulane.session.run import SessionSpec, launch_warnings, usable_cores

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["device=cpu", "ranks=2", "sizes.min=64K", "sizes.max=1M", "iters=2", "warmup=1"]


def test_log_line_every_interval_with_eta(capsys: pytest.CaptureFixture[str]) -> None:
    log = LogProgress(True, total=10, every_s=10.0)
    start = log.started
    log.update(3, "all_reduce 1 MiB")
    log.tick(start + 5)  # not due yet
    assert capsys.readouterr().err == ""
    log.tick(start + 30)
    err = capsys.readouterr().err
    assert err == "# progress: 3/10 points, 0:00:30 elapsed, ETA 0:01:10 (all_reduce 1 MiB)\n"
    log.tick(start + 35)  # 5 s after the last line
    assert capsys.readouterr().err == ""
    log.update(10, "done")
    log.tick(start + 41)
    assert "10/10 points" in capsys.readouterr().err


def test_eta_never_below_the_runs_floor(capsys: pytest.CaptureFixture[str]) -> None:
    log = LogProgress(True, total=10, every_s=0.0)
    log.floor_s = 200.0  # a doubling sweep: the big sizes come last
    log.update(5, "all_reduce 1 KiB")
    log.tick(log.started + 20)  # half the points in 20 s, but the floor says 180 s more
    assert "ETA 0:03:00" in capsys.readouterr().err


def test_no_log_line_when_disabled(capsys: pytest.CaptureFixture[str]) -> None:
    log = LogProgress(False, total=4, every_s=0.0)
    log.update(1, "x")
    log.tick(log.started + 100)
    assert capsys.readouterr().err == ""
    assert clock(3725) == "1:02:05"


def _sweep(args: list[str]) -> SweepConfig:
    return compose_typed("sweep", args)


def test_estimate_of_a_long_cpu_sweep_only() -> None:
    cfg = _sweep(["device=cpu", "sizes.max=1G"])
    long = sweep_estimate_s(build_plan(cfg, on_device=False), 2, "cpu", 2)
    cfg = _sweep(SMALL)
    short = sweep_estimate_s(build_plan(cfg, on_device=False), 2, "cpu", 2)
    assert long > 60 > short
    # 64 ranks on 2 cores take turns: 32 times the 2-rank floor
    cfg = _sweep(["device=cpu", "sizes.max=1M"])
    plan = build_plan(cfg, on_device=False)
    assert sweep_estimate_s(plan, 64, "cpu", 2) == pytest.approx(
        32 * sweep_estimate_s(plan, 2, "cpu", 2)
    )


def _spec(world: int, estimate: float | None = None) -> SessionSpec:
    return SessionSpec("sweep", "collective", "torch", "torch on cpu", world, estimate_s=estimate)


def test_warnings_before_the_run(tmp_path: Path) -> None:
    cores = usable_cores()
    many = LaunchSpec(tmp_path, cores * 4, job="x:y", timeout_s=60)
    lines = launch_warnings(_spec(cores * 4, 250.0), LocalLauncher(), many)
    assert any(ln.startswith("# estimate: this run takes at least 0:04:10") for ln in lines)
    assert any(
        f"{cores * 4} ranks on {cores} core(s)" in ln and "timeout_s=60" in ln for ln in lines
    )
    fine = LaunchSpec(tmp_path, 1, job="x:y")
    assert launch_warnings(_spec(1, 10.0), LocalLauncher(), fine) == []
    slurm = SlurmLauncher(SlurmSettings(nodes=1, tasks_per_node=1), device="cpu")
    lines = launch_warnings(_spec(1), slurm, fine)
    assert len(lines) == 1 and "launcher.tasks_per_node=N" in lines[0]
    # Slurm's ranks are on the nodes: no oversubscription warning from this host's cores
    wide = SlurmLauncher(SlurmSettings(nodes=2, tasks_per_node=cores * 4), device="cpu")
    assert launch_warnings(_spec(cores * 8), wide, LaunchSpec(tmp_path, cores * 8, job="x:y")) == []


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPULANE_PROGRESS_S": "0.5"}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def test_progress_lines_in_a_log(tmp_path: Path) -> None:
    """stdout and stderr to files, as under nohup or a batch system."""
    with open(tmp_path / "out.log", "w") as out, open(tmp_path / "err.log", "w") as err:
        proc = subprocess.run(
            [sys.executable, "-m", "gpulane", "sweep", *SMALL, f"results_dir={tmp_path}"],
            stdout=out, stderr=err, env=_env(), cwd=tmp_path, timeout=300,
        )  # fmt: skip
    err_text = (tmp_path / "err.log").read_text()
    assert proc.returncode == 0, err_text
    lines = re.findall(r"^# progress: (\d+)/(\d+) points, \d+:\d\d:\d\d elapsed.*$", err_text, re.M)
    assert lines, err_text
    assert {total for _, total in lines} == {"5"}  # 64K..1M: five sizes
    assert "\x1b[" not in err_text  # plain text, no terminal codes
    assert "# progress" not in (tmp_path / "out.log").read_text()  # the table stays clean


def test_terminal_gets_the_bar_not_log_lines(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpulane", "sweep", *SMALL, f"results_dir={tmp_path}"],
        stdin=slave, stdout=slave, stderr=slave, env=_env(), cwd=tmp_path, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.wait(timeout=60) == 0
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "# progress:" not in text
    assert "ETA" in text  # rich's live bar, drawn on the terminal
    assert "1048576" in text  # the table's last size


@pytest.mark.slurm
def test_one_rank_slurm_collective_is_warned_about(tmp_path: Path) -> None:
    """launcher=slurm on CPU nodes with no rank count runs one task: said before it runs."""
    up = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    if up.returncode != 0 or not up.stdout.split():
        pytest.fail("Slurm is not up; start it with: sudo scripts/slurm-up.sh")
    args = ["launcher=slurm", "launcher.poll_s=0.5", "launcher.time=5", "device=cpu"]
    proc = subprocess.run(
        [sys.executable, "-m", "gpulane", "sweep", *args, "sizes.max=64", "iters=2",
         f"results_dir={tmp_path}"],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header = proc.stdout.split("# slurm job")[0]  # before the job is queued
    assert "# warning: 1 rank in this Slurm job" in header
    assert "launcher.tasks_per_node=N" in header
