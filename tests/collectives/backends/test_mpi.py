"""The MPI backend through real mpirun runs of `gpulane sweep backend=mpi launcher=mpirun`.

Every test that starts ranks needs Open MPI's mpirun and mpi4py; they fail, not skip,
when those are missing (scripts/test.sh installs them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpulane.collectives.backends.mpi_buffers import ArrayModuleOps
from gpulane.collectives.backends.mpi_library import parse_ompi_cuda
from gpulane.collectives.pattern import count_wrong, expected, fill_inputs
from gpulane.collectives.spec import DTYPES, plan_point
from tests.collectives.nccl_tests_formulas import nccl_tests_bw

pytestmark = pytest.mark.mpi

ALL9 = "[all_reduce,all_gather,reduce_scatter,alltoall,broadcast,reduce,sendrecv,gather,scatter]"
SEVEN = {
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
}
FAST = ["warmup=1", "iters=2", "progress=false", "timeout_s=120"]


def sweep(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    # Ranks waiting in a collective yield the core instead of spinning on it: CI's two
    # cores are shared with other tests, and mpirun yields by itself only when it knows
    # it oversubscribes. The same MPI and collectives; about 30 % less CPU for the 2-rank
    # sweep (benchmarks/ci/slurm-tests/README.md).
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulane",
            "sweep",
            "backend=mpi",
            "launcher=mpirun",
            f"results_dir={tmp_path}",
            *FAST,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def rows(tmp_path: Path) -> list[dict[str, Any]]:
    files = list(tmp_path.glob("*/rows.jsonl"))
    assert len(files) == 1, files
    from gpulane.record import read_rows  # joined with the run's facts (facts.jsonl)

    return [r.to_dict() for r in read_rows(files[0])]


def check_rows(out: list[dict[str, Any]], ops: set[str], dtypes: set[str], world: int) -> None:
    measured = [r for r in out if r["time_us"] is not None]
    assert {r["op"] for r in measured} == ops
    assert {r["dtype"] for r in measured} == dtypes
    for r in measured:
        assert r["backend"] == "mpi"
        assert r["world_size"] == world
        assert r["wrong"] == 0, r
        assert r["status"] == "ok"
        assert r["time_us"] > 0
        assert r["versions"]["mpi"].startswith("Open MPI")
        assert r["versions"]["mpi_buffers"] == "host"
        assert r["extra"]["launcher"] == "mpirun"
        # nccl-tests' own GetBw, from the row's count and time: not gpulane's spec
        alg, bus = nccl_tests_bw(
            r["op"], r["count"], DTYPES[r["dtype"]].itemsize, r["time_us"] / 1e6, world
        )
        assert r["algbw_gbps"] == pytest.approx(alg)
        assert r["busbw_gbps"] == pytest.approx(bus)
        assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / 1e9 / (r["time_us"] / 1e6))
    # Both placements for everything but broadcast (MPI_Bcast is in place by nature).
    for op in ops:
        places = {r["in_place"] for r in measured if r["op"] == op}
        assert places == ({True} if op == "broadcast" else {True, False}), op


def test_two_ranks_every_collective_and_dtype(tmp_path: Path) -> None:
    p = sweep(
        tmp_path,
        f"collectives={ALL9}",
        "dtype=[float,double,int8,uint8,int32,int64]",
        "sizes.min=8",
        "sizes.max=4K",
        "sizes.factor=512",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "# mpi: Open MPI" in p.stdout and "host (numpy) buffers" in p.stdout
    assert "# all_reduce (mpi, 2 ranks)" in p.stdout
    out = rows(tmp_path)
    ops = set(ALL9.strip("[]").split(","))
    check_rows(out, ops, {"float", "double", "int8", "uint8", "int32", "int64"}, 2)
    # 9 collectives x 6 dtypes x 2 sizes, both placements but broadcast's
    assert len(out) == (8 * 2 + 1) * 6 * 2
    # Zero-element points (8 B of float over 2 ranks' all_gather) run and check too.
    assert any(r["count"] == 0 and r["op"] == "all_gather" for r in out)


def test_four_ranks_every_collective_max(tmp_path: Path) -> None:
    p = sweep(
        tmp_path,
        "ranks=4",
        "collectives=all",
        "dtype=[float,int32,uint8]",
        "redop=max",
        "root=3",
        "sizes.min=64",
        "sizes.max=4K",
        "sizes.factor=64",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    out = rows(tmp_path)
    check_rows(out, SEVEN, {"float", "int32", "uint8"}, 4)
    assert {r["redop"] for r in out if r["op"] == "all_reduce"} == {"max"}
    assert {r["root"] for r in out if r["op"] in ("broadcast", "reduce")} == {3}


def test_prod_min_and_16_bit_moves(tmp_path: Path) -> None:
    p = sweep(
        tmp_path / "prod",
        "collectives=[all_reduce,reduce_scatter,reduce]",
        "dtype=[int8,uint64,float]",
        "redop=prod",
        "sizes.min=256",
        "sizes.max=256",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    check_rows(
        rows(tmp_path / "prod"),
        {"all_reduce", "reduce_scatter", "reduce"},
        {"int8", "uint64", "float"},
        2,
    )
    # half all_gather/alltoall/broadcast/sendrecv move 16-bit words: no reduction needed.
    p = sweep(
        tmp_path / "half",
        "collectives=[all_gather,alltoall,broadcast,sendrecv,gather,scatter]",
        "dtype=half",
        "sizes.min=1K",
        "sizes.max=1K",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    check_rows(
        rows(tmp_path / "half"),
        {"all_gather", "alltoall", "broadcast", "sendrecv", "gather", "scatter"},
        {"half"},
        2,
    )


def test_corrupted_element_is_counted(tmp_path: Path) -> None:
    p = sweep(
        tmp_path,
        "collectives=[all_reduce,all_gather,reduce_scatter]",
        "sizes.min=1K",
        "sizes.max=1K",
        "corrupt_rank=1",
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "wrong results at" in p.stderr
    out = rows(tmp_path)
    assert out and all(r["wrong"] == 1 and r["status"] == "error" for r in out)


def test_world_size_mismatch_under_users_mpirun(tmp_path: Path) -> None:
    """mpirun -np 3 but ranks=2 in the configuration: one error line, exit 2."""
    p = subprocess.run(
        [
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "3",
            sys.executable,
            "-m",
            "gpulane",
            "sweep",
            "backend=mpi",
            "ranks=2",
            f"results_dir={tmp_path}",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("gpulane: error:")]
    assert len(errors) == 1, p.stderr
    assert "world size mismatch" in errors[0]
    assert "ranks=2" in errors[0] and "3 ranks" in errors[0]
    # Refused from mpirun's variables before torch and MPI start (it used to take a
    # run directory, 3 torch imports and an MPI start: 5.4 CPU-s, 44-53 s under CI load).
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())


def test_users_mpirun_runs_the_sweep(tmp_path: Path) -> None:
    """Started by the user's own mpirun: rank 0 prints the table and writes the rows."""
    p = subprocess.run(
        [
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "2",
            sys.executable,
            "-m",
            "gpulane",
            "sweep",
            "backend=mpi",
            "collectives=[all_reduce,sendrecv]",
            "sizes.min=64",
            "sizes.max=256",
            "sizes.factor=4",
            f"results_dir={tmp_path}",
            *FAST,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank 0 of 2 (mpirun)" in p.stdout
    # every rank derived the same run directory from mpirun's job (PMIX_NAMESPACE)
    (run,) = list(tmp_path.iterdir())
    assert run.name.startswith("mpi-")
    check_rows(rows(tmp_path), {"all_reduce", "sendrecv"}, {"float"}, 2)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["collectives=[all_reduce,all_gather]", "dtype=[float,bfloat16]", "redop=avg"],
            ["MPI has no averaging reduction", "numpy has no bfloat16"],
        ),
        (["collectives=[all_reduce]", "dtype=half"], ["cannot reduce half"]),
    ],
)
def test_unsupported_points_stop_with_one_clear_error(
    tmp_path: Path, args: list[str], words: list[str]
) -> None:
    p = sweep(tmp_path, "sizes.min=64", "sizes.max=64", *args)
    assert p.returncode != 0
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("gpulane: error:")]
    assert len(errors) == 1, p.stderr
    for w in words:
        assert w in errors[0]
    assert "use " in errors[0] or "choose another dtype, redop or collective" in errors[0]
    assert p.returncode == 2  # bad input, found before a point is measured
    # nothing measured: no run directory (found before the ranks start) or no timed row
    measured = [
        line
        for f in tmp_path.glob("*/rows.jsonl")
        for line in f.read_text().splitlines()
        if json.loads(line).get("time_us") is not None
    ]
    assert not measured


def test_local_launcher_says_to_use_mpirun(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulane",
            "sweep",
            "backend=mpi",
            "launcher=local",
            f"results_dir={tmp_path}",
            "sizes.max=64",
            *FAST,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode != 0
    assert "backend=mpi needs ranks started by MPI" in p.stderr
    assert "launcher=mpirun" in p.stderr


# -- pure parts ---------------------------------------------------------------------------
def test_numpy_ops_count_exactly_the_wrong_elements() -> None:
    ops = ArrayModuleOps(np)
    for op in ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "scatter"):
        for dt in ("int8", "uint64", "half", "float"):
            point = plan_point(op, 1024, dt, "sum", 0, 3)
            n = point.counts.recv
            recv = np.zeros(n, dtype=point.dt.numpy_name)
            ops.write(recv, 0, expected(ops, point, 1, ops.arange(0, n)))
            assert count_wrong(ops, point, 1, recv) == 0, (op, dt)
            recv[3] += 1
            assert count_wrong(ops, point, 1, recv) == 1, (op, dt)
            send = np.zeros(point.counts.send, dtype=point.dt.numpy_name)
            fill_inputs(ops, point, 1, send, recv)
            assert not recv.any()


def test_ompi_info_parsing() -> None:
    text = (
        "mca:opal:base:param:opal_built_with_cuda_support:value:false\n"
        "mca:mpi:base:param:mpi_built_with_cuda_support:value:true\n"
    )
    assert parse_ompi_cuda(text) is True
    assert parse_ompi_cuda(text.replace("true", "false")) is False
    assert parse_ompi_cuda("nothing here") is None


# -- a rank that fails alone --------------------------------------------------------------
def lone_failure_job(cfg: Any, ctx: Any) -> None:
    """Rank 1 fails while rank 0 waits in a collective for it (run by the ranks)."""
    from gpulane.collectives.backends.mpi import MpiBackend
    from gpulane.errors import RunFailed

    backend = MpiBackend(ctx, device="cpu")
    try:
        ctx.heartbeat(0, "the point")
        if ctx.rank == 1:
            raise RunFailed("rank 1 broke alone")
        backend.control.barrier()
    finally:
        backend.close()


def test_rank_failing_alone_aborts_the_job_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a wait in MPI_Finalize until the watchdog's timeout: MPI_Abort at exit."""
    import time

    from gpulane.rundir import make_run_dir, save_config
    from tests.helpers import run_mpirun
    from tests.launch.test_mpirun import ROOT, job_config

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    cfg = job_config(tmp_path)
    cfg.timeout_s = 120
    run = make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=2)
    t0 = time.monotonic()
    code = run_mpirun(saved, run, {}, "tests.collectives.backends.test_mpi:lone_failure_job")
    assert code == 1
    assert time.monotonic() - t0 < 60
    err = capsys.readouterr().err
    assert "rank 1" in err and "rank 1 broke alone" in err and "during the point" in err
