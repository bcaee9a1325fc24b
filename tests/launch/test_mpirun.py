"""launcher=mpirun: the command line, the watchdog and the errors, with Open MPI's real mpirun.

Ranks of the custom jobs below import this module, so the repository root is put on
PYTHONPATH for them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpulane.config.commands import SweepConfig
from gpulane.config.load import typed
from gpulane.launch.base import log_path
from gpulane.launch.mpirun.command import (
    Mpi4pyInfo,
    all_local,
    build_command,
    check_mpi4py,
    physical_cores,
)
from gpulane.launch.mpirun.failure import describe_failure, mpirun_failure
from gpulane.rundir import write_heartbeat, write_rank_error
from tests import helpers
from tests.helpers import rows_of, run_mpirun

pytestmark = pytest.mark.mpi
ROOT = Path(__file__).resolve().parents[2]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


# -- jobs the ranks run -----------------------------------------------------------------
def kill_job(cfg: Any, ctx: Any) -> None:
    ctx.heartbeat(0, "kill point")
    if ctx.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)


def hang_job(cfg: Any, ctx: Any) -> None:
    ctx.heartbeat(0, "first point")
    if ctx.rank == 0:
        ctx.heartbeat(1, "second point")
    time.sleep(600)


def ok_job(cfg: Any, ctx: Any) -> None:
    """One measured row from rank 0: a run that measured nothing does not end well."""
    from gpulane.record import Row, RowWriter

    if ctx.is_leader:
        with RowWriter(ctx.run_dir) as w:
            w.write(Row(run_id=str(cfg.run_id), kind="collective", backend="custom", op="x"))
    ctx.heartbeat(0, "done")


def job_config(tmp_path: Path, **launcher: Any) -> Any:
    return typed(
        {
            "backend": {"name": "torch"},
            "launcher": {
                "name": "mpirun",
                "command": "mpirun",
                "extra_args": [],
                "hostfile": None,
                **launcher,
            },
            "collectives": ["all_reduce"],
            "sizes": {"min": 8, "max": 8, "factor": 2, "step": None},
            "dtype": "float",
            "redop": "sum",
            "root": 0,
            "in_place": "both",
            "warmup": 0,
            "iters": 1,
            "check_iters": 0,
            "graph": False,
            "graph_launches": 1,
            "ranks": 2,
            "device": "cpu",
            "timeout_s": 3,
            "progress": False,
            "results_dir": str(tmp_path),
            "build": "test",
            "env": {},
        },
        SweepConfig,
    )


def start_job(tmp_path: Path, job: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, Any]:
    from gpulane.rundir import make_run_dir, save_config

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    cfg = job_config(tmp_path)
    run = make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=2)
    return run_mpirun(saved, run, {}, f"tests.launch.test_mpirun:{job}"), run


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return helpers.gpulane("sweep", *args, cwd=Path.cwd(), timeout=240, env=env)


# -- real runs ----------------------------------------------------------------------------
def test_rank_killed_by_a_signal_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, run = start_job(tmp_path, "kill_job", monkeypatch)
    assert code == 1
    err = capsys.readouterr().err
    assert "rank 1" in err and "was killed by SIGKILL" in err and "during kill point" in err
    (row,) = run.rows()
    assert row.status == "error" and "rank 1" in row.error
    assert (run.path / "logs" / "mpirun.log").exists()


def test_stalled_rank_ends_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    t0 = time.monotonic()
    code, run = start_job(tmp_path, "hang_job", monkeypatch)
    assert code == 1
    assert time.monotonic() - t0 < 60
    err = capsys.readouterr().err
    assert "no progress for 3 s at second point" in err
    assert "rank 1" in err and "last at first point" in err
    (row,) = run.rows()
    assert row.extra["at"] == "second point"


def test_job_that_ends_well(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, run = start_job(tmp_path, "ok_job", monkeypatch)
    assert code == 0, capsys.readouterr()
    cmd = (run.path / "logs" / "mpirun.cmd").read_text()
    assert " -np 2 " in cmd and "-x GPULANE_RUN_ID" in cmd and "-x PYTHONPATH" in cmd
    assert ("--allow-run-as-root" in cmd) == (os.geteuid() == 0)
    assert (run.path / "logs" / "rank-0.log").exists() and (
        run.path / "logs" / "rank-1.log"
    ).exists()


def test_torch_backend_started_by_mpirun(tmp_path: Path) -> None:
    p = cli(
        "backend=torch",
        "launcher=mpirun",
        "collectives=[all_reduce]",
        "sizes.min=1K",
        "sizes.max=1K",
        "warmup=1",
        "iters=2",
        "progress=false",
        f"results_dir={tmp_path}",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    (rows_file,) = tmp_path.glob("*/rows.jsonl")
    out = rows_of(rows_file.parent)
    assert out and all(r["backend"] == "torch-gloo" and r["wrong"] == 0 for r in out)
    assert {r["extra"]["launcher"] for r in out} == {"mpirun"}


def test_mpi4py_that_sees_single_processes_is_named(tmp_path: Path) -> None:
    """A launcher that sets Open MPI's rank variables but whose MPI is not mpi4py's."""
    fake = tmp_path / "bin" / "mpirun"
    fake.parent.mkdir()
    fake.write_text(
        f"#!{sys.executable}\n"
        "import os, subprocess, sys\n"
        "a = sys.argv[1:]\n"
        "if a == ['--version']:\n"
        "    print('mpirun (Open MPI) 4.1.4'); sys.exit(0)\n"
        "n = int(a[a.index('-np') + 1]); cmd = a[a.index('sh'):]\n"
        "procs = [subprocess.Popen(cmd, env={**os.environ, 'OMPI_COMM_WORLD_RANK': str(r),\n"
        "         'OMPI_COMM_WORLD_SIZE': str(n), 'OMPI_COMM_WORLD_LOCAL_RANK': str(r)})\n"
        "         for r in range(n)]\n"
        "sys.exit(max(p.wait() for p in procs))\n"
    )
    fake.chmod(0o755)
    p = cli(
        "backend=mpi",
        "launcher=mpirun",
        f"launcher.command={fake}",
        "sizes.max=64",
        "progress=false",
        f"results_dir={tmp_path / 'runs'}",
    )
    assert p.returncode == 2, p.stdout + p.stderr  # the setup is wrong: one line, bad input
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("gpulane: error:")]
    assert len(errors) == 1, p.stderr
    assert "mpi4py is built against another MPI than the mpirun that started it" in errors[0]


# -- bad input that stops before any rank starts ----------------------------------------
def test_missing_mpirun(tmp_path: Path) -> None:
    p = cli(
        "backend=mpi",
        "launcher=mpirun",
        "launcher.command=/nowhere/mpirun",
        f"results_dir={tmp_path}",
    )
    assert p.returncode == 2
    assert p.stderr.count("gpulane: error:") == 1
    assert "openmpi-bin" in p.stderr and "module load" in p.stderr


def test_mpi_library_missing(tmp_path: Path) -> None:
    p = cli(
        "backend=mpi",
        "launcher=mpirun",
        f"results_dir={tmp_path}",
        env={"MPI4PY_LIBMPI": "/nowhere/libmpi.so"},
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.count("gpulane: error:") == 1
    assert "mpi4py cannot load an MPI library" in p.stderr and "openmpi-bin" in p.stderr


def test_mpi4py_missing(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "mpi4py"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mpi4py'\", name='mpi4py')\n"
    )
    p = cli(
        "backend=mpi",
        "launcher=mpirun",
        f"results_dir={tmp_path / 'runs'}",
        env={"PYTHONPATH": f"{shadow.parent}{os.pathsep}{ROOT}"},
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert "mpi4py is not installed: pip install mpi4py" in p.stderr


def test_mpich_launcher_with_open_mpi_mpi4py(tmp_path: Path) -> None:
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/bin/sh\necho 'HYDRA build details:'\necho '    Version: 4.1.2'\n")
    fake.chmod(0o755)
    p = cli("backend=mpi", "launcher=mpirun", f"launcher.command={fake}", f"results_dir={tmp_path}")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "mpi4py uses Open MPI" in p.stderr and "MPICH" in p.stderr
    assert "built against another MPI" in p.stderr


def test_rank_count_in_extra_args_is_refused(tmp_path: Path) -> None:
    p = cli(
        "backend=mpi", "launcher=mpirun", "launcher.extra_args=[-np,3]", f"results_dir={tmp_path}"
    )
    assert p.returncode == 2
    assert "leave the rank count out" in p.stderr


# -- pure parts ---------------------------------------------------------------------------
def test_open_mpi_command() -> None:
    cmd = build_command(
        "/usr/bin/mpirun",
        "Open MPI",
        4,
        ["python", "-m", "w"],
        Path("/r/logs"),
        ["PATH", "NCCL_DEBUG"],
        hostfile="/h",
        extra_args=["--bind-to", "none"],
        root=True,
        oversubscribe=True,
    )
    assert cmd[:4] == ["/usr/bin/mpirun", "-np", "4", "--allow-run-as-root"]
    assert "--oversubscribe" in cmd and cmd[cmd.index("--hostfile") + 1] == "/h"
    assert cmd[cmd.index("NCCL_DEBUG") - 1] == "-x"
    assert cmd[cmd.index("sh") + 3 :] == ["/r/logs", "python", "-m", "w"]
    plain = build_command("mpirun", "Open MPI", 2, ["w"], Path("/l"), [])
    assert "--allow-run-as-root" not in plain and "--oversubscribe" not in plain


def test_mpich_command() -> None:
    cmd = build_command(
        "mpiexec", "MPICH", 2, ["w"], Path("/l"), ["A", "B"], hostfile="/h", root=True
    )
    assert cmd[:3] == ["mpiexec", "-n", "2"]
    assert "--allow-run-as-root" not in cmd and "--oversubscribe" not in cmd
    assert cmd[cmd.index("-genvlist") + 1] == "A,B" and cmd[cmd.index("-f") + 1] == "/h"


def test_mpirun_failure_messages() -> None:
    exited = (
        "Primary job  terminated normally, but 1 process returned\n"
        "a non-zero exit code. Per user-direction, the job has been aborted.\n"
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n"
        "  Process name: [[16177,1],2]\n  Exit code:    2\n"
    )
    assert mpirun_failure(exited) == (2, 2, None)
    killed = (
        "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).\n"
    )
    assert mpirun_failure(killed) == (1, -9, None)
    slots = "There are not enough slots available in the system to satisfy the 9\nslots"
    rank, _, summary = mpirun_failure(slots)
    assert rank is None and summary and "not enough slots" in summary


def test_failure_names_the_rank_that_wrote_its_error(tmp_path: Path) -> None:
    """The diagnosis reads the errors the ranks wrote (.heartbeat/error-N), not text in
    their logs: a log line that looks like an error is only a rank's last output."""
    for rank, text in ((0, "gpulane: error: only printed, not written\n"), (1, "working\n")):
        log_path(tmp_path, rank).parent.mkdir(parents=True, exist_ok=True)
        log_path(tmp_path, rank).write_text(text)
        write_heartbeat(tmp_path, rank, 3, "all_reduce 1 MiB", f"host{rank}")
    (tmp_path / "logs" / "mpirun.log").write_text("  Process name: [[1,1],0]\n  Exit code:    1\n")
    write_rank_error(tmp_path, 1, 3, "the plan needs 4 GPUs, this node has 2")
    message, ranks, where = describe_failure(tmp_path, 2, 1)
    assert ranks == [1] and where == "all_reduce 1 MiB"
    assert "rank 1 (pid" in message and "on host1)" in message
    assert "its last output: gpulane: error: rank 1: the plan needs 4 GPUs, this node has 2" in (
        message
    )
    (tmp_path / ".heartbeat" / "error-1").unlink()  # no rank wrote an error
    message, ranks, _ = describe_failure(tmp_path, 2, 1)
    assert ranks == [0] and "its last output: gpulane: error: only printed, not written" in message


def test_mpi4py_flavor_check() -> None:
    check_mpi4py(Mpi4pyInfo("Open MPI v4.1.4, package: Debian", None), "Open MPI", "mpirun")
    check_mpi4py(Mpi4pyInfo("MPICH Version: 4.1", None), "Intel MPI", "mpiexec")
    with pytest.raises(Exception, match="built against another MPI"):
        check_mpi4py(Mpi4pyInfo("MPICH Version: 4.1", None), "Open MPI", "mpirun")


def test_where_ranks_run() -> None:
    assert all_local(None, [], {})
    assert not all_local("/h", [], {})
    assert not all_local(None, ["--host", "a,b"], {})
    assert not all_local(None, [], {"SLURM_JOB_ID": "3"})
    assert physical_cores() >= 1
