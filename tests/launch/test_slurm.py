"""The Slurm launcher against a real Slurm (scripts/slurm-up.sh): these tests fail, not
skip, when Slurm is not up. Each run gets its own run directory (and so its own submitit
folder) under tmp_path: job ids restart at 1 when Slurm's state is wiped."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from gpulane.config.commands import SweepConfig
from gpulane.config.load import typed
from gpulane.launch.slurm.monitor import JobRecord
from gpulane.launch.slurm.settings import executor_parameters, hydra_launcher_settings, settings
from gpulane.parquet_rows import read_parquet
from gpulane.record import Row, RowWriter, read_rows
from gpulane.rundir import make_run_dir
from gpulane.session.collect import collect
from tests import helpers
from tests.helpers import run_slurm

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slurm


@pytest.fixture(scope="session")
def slurm() -> str:
    """The partition's node state; fails the test when Slurm is not up."""
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as err:
        pytest.fail(f"Slurm is not installed or not answering ({err}); run scripts/slurm-up.sh")
    states = out.stdout.split()
    if out.returncode != 0 or not any(
        s.startswith(("idle", "mixed", "alloc", "completing")) for s in states
    ):
        pytest.fail(
            "Slurm is not up (sinfo: "
            + (out.stdout.strip() or out.stderr.strip() or "no output")
            + "); start it with: sudo scripts/slurm-up.sh"
        )
    return states[0]


def gpulane(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return helpers.gpulane(*args, cwd=REPO, timeout=timeout)


def only_run_dir(root: Path) -> Path:
    dirs = [p for p in root.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


# ---------------------------------------------------------------- jobs used by the tests


def fake_row(cfg: Any, size: int) -> Row:
    return Row(
        run_id=str(cfg.run_id),
        kind="collective",
        backend="test",
        op="all_reduce",
        world_size=2,
        dtype="float",
        redop="sum",
        in_place=True,
        size_bytes=size,
        count=max(size // 4, 1),
        time_us=1.0,
        algbw_gbps=0.0,
        busbw_gbps=0.0,
        wrong=0,
    )


def fail_on_rank_1(cfg: Any, ctx: Any) -> None:
    if ctx.rank == 0:
        with RowWriter(ctx.run_dir) as w:
            w.write(fake_row(cfg, 8))
        return
    print("about to fail", file=sys.stderr)
    raise RuntimeError("disk on fire in rank 1")


def slow_rows(cfg: Any, ctx: Any) -> None:
    for i in range(600):
        ctx.heartbeat(i, f"point {i}")
        if ctx.rank == 0:
            with RowWriter(ctx.run_dir) as w:
                w.write(fake_row(cfg, 8 * (i + 1)))
        time.sleep(0.2)


def direct_cfg(tmp_path: Path, **launcher: Any) -> Any:
    cfg = typed(
        {
            "build": "slurm-test",
            "results_dir": str(tmp_path),
            "env": {},
            "timeout_s": 120,
            "progress": False,
            "device": "cpu",
            "backend": {"name": "torch"},
            "launcher": {
                "name": "slurm",
                "nodes": 1,
                "tasks_per_node": 2,
                "time": 5,
                "poll_s": 0.5,
                "startup_s": 60,
                # The job functions above live in tests/: run the tasks from the repository.
                "sbatch_args": {"chdir": str(REPO)},
                **launcher,
            },
        },
        SweepConfig,
    )
    return cfg


def direct_run(tmp_path: Path, job: str, **launcher: Any) -> tuple[int, Path]:
    cfg = direct_cfg(tmp_path, **launcher)
    run = make_run_dir(cfg)
    status = run_slurm(cfg, run, {"GPULANE_TEST": "1"}, job)
    return status, run.path


# ----------------------------------------------------------------------- settings (pure)


def test_settings_to_submitit_parameters() -> None:
    cfg = OmegaConf.create(
        {
            "backend": {"name": "mpi"},
            "launcher": {
                "nodes": 4,
                "gpus_per_node": 8,
                "tasks_per_node": None,
                "partition": "gpu",
                "account": "acct",
                "qos": "high",
                "time": 30,
                "constraint": "h100",
                "exclusive": True,
                "sbatch_args": {"reservation": "accept"},
                "srun_args": ["--cpu-bind=none"],
                "setup": ["module load cuda"],
                "container": {"image": "nvcr.io#nvidia/pytorch:24.05", "mounts": ["/data:/data"]},
            },
        }
    )
    s = settings(cfg)
    assert s.world_size == 32 and s.tasks_per_node == 8
    p = executor_parameters(s, "gpulane-x")
    assert p["nodes"] == 4 and p["tasks_per_node"] == 8 and p["gpus_per_node"] == 8
    assert p["timeout_min"] == 30 and p["slurm_partition"] == "gpu"
    assert p["slurm_account"] == "acct" and p["slurm_qos"] == "high"
    assert p["slurm_constraint"] == "h100" and p["slurm_exclusive"] is True
    assert p["slurm_additional_parameters"] == {"reservation": "accept"}
    assert p["slurm_setup"] == ["module load cuda"]
    assert p["slurm_srun_args"] == [
        "--cpu-bind=none",
        "--container-image=nvcr.io#nvidia/pytorch:24.05",
        "--container-mounts=/data:/data",
        "--mpi=pmix",  # MPI backends start under srun through PMIx
    ]
    h = hydra_launcher_settings(cfg)
    assert h["tasks_per_node"] == 8 and h["additional_parameters"]["exclusive"] is True
    assert "export SLURM_MPI_TYPE=pmix" in h["setup"]


# ------------------------------------------------------------------------- real Slurm


def test_gloo_sweep_two_tasks(slurm: str, tmp_path: Path) -> None:
    res = gpulane(
        "sweep",
        "launcher=slurm",
        "launcher.tasks_per_node=2",
        "launcher.poll_s=0.5",
        "launcher.time=5",
        "device=cpu",
        "sizes.max=64",
        "iters=5",
        "warmup=1",
        "+env.NCCL_DEBUG=WARN",
        f"results_dir={tmp_path}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "# slurm job" in res.stdout and "completed" in res.stdout
    run = only_run_dir(tmp_path)
    rows = [x.to_dict() for x in read_rows(run / "rows.jsonl")]
    assert [r["size_bytes"] for r in rows] == [8, 16, 32, 64]
    for r in rows:
        assert r["status"] == "ok" and r["wrong"] == 0
        assert r["world_size"] == 2 and r["backend"] == "torch-gloo"
        assert r["extra"]["launcher"] == "slurm"
        assert r["host"]
        assert r["env"].get("NCCL_DEBUG") == "WARN"  # the run's env reached the ranks
    assert (run / "rows.parquet").exists()
    assert len(read_parquet(run / "rows.parquet")) == 4
    record = JobRecord.load(run)
    assert record.state == "COMPLETED" and record.tasks == 2
    # The table is printed as nccl-tests prints it.
    assert "all_reduce (torch-gloo, 2 ranks)" in res.stdout


def test_hydra_multirun_is_a_job_array(slurm: str, tmp_path: Path) -> None:
    res = gpulane(
        "sweep",
        "-m",
        "launcher=slurm",
        "launcher.tasks_per_node=2",
        "device=cpu",
        "sizes.max=16",
        "iters=3",
        "warmup=1",
        "dtype=float,int32",
        f"results_dir={tmp_path}",
        f"hydra.sweep.dir={tmp_path}/multirun",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    runs = sorted(p for p in tmp_path.glob("slurm-*") if (p / "rows.jsonl").exists())
    assert len(runs) == 2, list(tmp_path.iterdir())
    dtypes = set()
    for run in runs:
        rows = [x.to_dict() for x in read_rows(run / "rows.jsonl")]
        assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
        assert {r["world_size"] for r in rows} == {2}
        dtypes |= {r["dtype"] for r in rows}
    assert dtypes == {"float", "int32"}
    # One sbatch with --array: submitit names the logs <array id>_<index>_<task>.
    logs = list((tmp_path / "multirun" / ".submitit").rglob("*_1_0_log.out"))
    assert logs, "no job-array logs"


def test_bad_input_found_by_the_tasks_is_one_line_with_its_status(
    slurm: str, tmp_path: Path
) -> None:
    """gloo cannot average int32: the tasks' pre-flight says so, as on the local launcher."""
    res = gpulane(
        "sweep",
        "launcher=slurm",
        "launcher.tasks_per_node=2",
        "launcher.poll_s=0.5",
        "launcher.time=5",
        "device=cpu",
        "dtype=int32",
        "redop=avg",
        "sizes.max=64",
        f"results_dir={tmp_path}",
    )
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("gpulane: error")]
    assert lines == [lines[0]] and "torch-gloo cannot run all_reduce int32 avg" in lines[0]
    assert "Traceback" not in res.stderr


def test_failed_task_gives_error_row(slurm: str, tmp_path: Path) -> None:
    status, run = direct_run(tmp_path, "tests.launch.test_slurm:fail_on_rank_1")
    assert status == 1
    rows = [x.to_dict() for x in read_rows(run / "rows.jsonl")]
    assert rows[0]["status"] == "ok"  # the row written before the failure is kept
    err = [r for r in rows if r["status"] == "error"]
    assert len(err) == 1
    e = err[0]
    record = JobRecord.load(run)
    assert e["extra"]["slurm_job"] == record.job_id and record.state == "FAILED"
    assert e["extra"]["task"] == 1
    assert e["extra"]["node"] and e["host"] == e["extra"]["node"]
    assert f"slurm job {record.job_id} failed: task 1 on {e['extra']['node']}" in e["error"]
    assert "disk on fire in rank 1" in e["error"]
    assert "RuntimeError" in e["extra"]["stderr_tail"]
    assert "about to fail" in e["extra"]["stderr_tail"]
    assert (run / "rows.parquet").exists()


def test_scancel_mid_run(slurm: str, tmp_path: Path) -> None:
    out: dict[str, Any] = {}
    cfg = direct_cfg(tmp_path)
    run = make_run_dir(cfg)

    def front() -> None:
        out["status"] = run_slurm(cfg, run, {}, "tests.launch.test_slurm:slow_rows")

    t = threading.Thread(target=front)
    t.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (run.path / "rows.jsonl").exists() and len(
            (run.path / "rows.jsonl").read_text().splitlines()
        ) >= 3:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the job wrote no rows within 120 s")
    job_id = json.loads((run.path / "slurm.json").read_text())["job_id"]
    subprocess.run(["scancel", job_id], check=True)
    t.join(timeout=120)
    assert not t.is_alive()
    assert out["status"] == 1
    rows = [x.to_dict() for x in read_rows(run.path / "rows.jsonl")]
    ok = [r for r in rows if r["status"] == "ok"]
    err = [r for r in rows if r["status"] == "error"]
    assert len(ok) >= 3
    assert len(err) == 1 and err[0]["extra"]["slurm_state"] == "CANCELLED"
    assert f"slurm job {job_id} was cancelled" in err[0]["error"]
    assert err[0]["extra"]["node"]


def test_no_wait_then_collect(slurm: str, tmp_path: Path) -> None:
    res = gpulane(
        "sweep",
        "launcher=slurm",
        "launcher.tasks_per_node=2",
        "launcher.wait=false",
        "launcher.poll_s=0.5",  # collect's polls too (the saved configuration's)
        "device=cpu",
        "sizes.max=16",
        "iters=3",
        "warmup=1",
        f"results_dir={tmp_path}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "submitted slurm job" in res.stdout
    run = only_run_dir(tmp_path)
    assert str(run.resolve()) in res.stdout
    assert collect(run) == 0
    assert JobRecord.load(run).state == "COMPLETED"
    assert len(read_parquet(run / "rows.parquet")) == 2


def test_mpi_backend_under_srun(slurm: str, tmp_path: Path) -> None:
    # backend=mpi adds srun --mpi=pmix: Open MPI's ranks meet through Slurm's PMIx.
    res = gpulane(
        "sweep",
        "launcher=slurm",
        "launcher.tasks_per_node=2",
        "launcher.poll_s=0.5",
        "backend=mpi",
        "device=cpu",
        "sizes.max=64",
        "iters=5",
        "warmup=1",
        f"results_dir={tmp_path}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    run = only_run_dir(tmp_path)
    rows = [x.to_dict() for x in read_rows(run / "rows.jsonl")]
    assert rows and all(r["status"] == "ok" and r["wrong"] == 0 for r in rows)
    assert {r["backend"] for r in rows} == {"mpi"} and {r["world_size"] for r in rows} == {2}
    assert {r["size_bytes"] for r in rows} == {8, 16, 32, 64}
    sbatch = next((run / "slurm").rglob("*_submission.sh")).read_text()
    assert "--mpi=pmix" in sbatch
