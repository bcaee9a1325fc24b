"""Real gloo sweeps on CPU through the local launcher: real rank processes, real checks."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import gpulane, rows_of, run_dirs

ALL = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_every_collective_checked_on_real_ranks(tmp_path: Path, ranks: int) -> None:
    out = gpulane(
        "sweep",
        f"ranks={ranks}",
        "device=cpu",
        "collectives=all",
        "sizes.min=1K",
        "sizes.max=64K",
        "sizes.factor=8",
        "warmup=1",
        "iters=3",
        "redop=sum",
        "root=1",
        "build=test",
        "results_dir=" + str(tmp_path),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    (run,) = run_dirs(tmp_path)
    rows = rows_of(run)
    assert {r["op"] for r in rows} == set(ALL)
    assert all(r["wrong"] == 0 and r["status"] == "ok" for r in rows)
    assert {r["world_size"] for r in rows} == {ranks}
    assert {r["backend"] for r in rows} == {"torch-gloo"}
    # all_gather and reduce_scatter run both ways; the others as torch offers them
    places = {(r["op"], r["in_place"]) for r in rows}
    assert ("all_gather", True) in places and ("all_gather", False) in places
    assert ("reduce_scatter", True) in places and ("reduce_scatter", False) in places
    assert ("all_reduce", True) in places and ("alltoall", False) in places
    # 3 sizes (1K, 8K, 64K) per collective and placement
    assert len(rows) == 3 * (len(ALL) + 2)
    for r in rows:
        assert r["time_us"] > 0 and r["time_us_p50"] > 0 and r["time_us_p99"] >= r["time_us_p50"]
        assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / r["time_us"] / 1e3)
    frame = pd.read_parquet(run / "rows.parquet")
    assert len(frame) == len(rows)
    # the nccl-tests-style table was printed, one line per size
    assert "out-of-place" in out.stdout and "#wrong" in out.stdout
    assert out.stdout.count("\n       1024  ") + out.stdout.count("\n        1024") >= 1


@pytest.mark.parametrize(
    ("dtype", "redop"),
    [
        ("int8", "sum"),
        ("bfloat16", "max"),
        ("half", "prod"),
        ("double", "min"),
        ("float", "avg"),
        ("int32", "prod"),
    ],
)
def test_dtypes_and_redops(tmp_path: Path, dtype: str, redop: str) -> None:
    out = gpulane(
        "sweep",
        "ranks=2",
        "device=cpu",
        "collectives=[all_reduce,reduce_scatter]",
        "sizes.min=256",
        "sizes.max=4K",
        "sizes.factor=4",
        "warmup=1",
        "iters=2",
        f"dtype={dtype}",
        f"redop={redop}",
        "results_dir=" + str(tmp_path),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    rows = rows_of(run_dirs(tmp_path)[0])
    assert rows and all(r["wrong"] == 0 for r in rows)
    assert {r["dtype"] for r in rows} == {dtype}
    assert {r["redop"] for r in rows} == {redop}


def test_corrupted_buffer_is_counted_and_fails_the_run(tmp_path: Path) -> None:
    out = gpulane(
        "sweep",
        "ranks=2",
        "device=cpu",
        "collectives=[all_reduce,all_gather]",
        "sizes.min=1K",
        "sizes.max=4K",
        "sizes.factor=4",
        "iters=2",
        "corrupt_rank=1",
        "results_dir=" + str(tmp_path),
        cwd=tmp_path,
    )
    assert out.returncode == 1
    assert "wrong results" in out.stderr
    rows = rows_of(run_dirs(tmp_path)[0])
    assert rows and all(r["wrong"] == 1 and r["status"] == "error" for r in rows)
    assert "Traceback" not in out.stderr


def test_int_avg_on_gloo_is_one_clear_error(tmp_path: Path) -> None:
    out = gpulane(
        "sweep",
        "ranks=2",
        "device=cpu",
        "dtype=int32",
        "redop=avg",
        "sizes.max=1K",
        "results_dir=" + str(tmp_path),
        cwd=tmp_path,
    )
    assert out.returncode == 2
    assert "torch-gloo cannot run all_reduce int32 avg" in out.stderr
    assert "Traceback" not in out.stderr


def test_multirun_sweeps_a_key(tmp_path: Path) -> None:
    out = gpulane(
        "sweep",
        "-m",
        "dtype=float,half",
        "ranks=2",
        "device=cpu",
        "sizes.min=1K",
        "sizes.max=1K",
        "iters=2",
        "results_dir=" + str(tmp_path),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    runs = run_dirs(tmp_path)
    assert len(runs) == 2
    assert sorted(rows_of(r)[0]["dtype"] for r in runs) == ["float", "half"]


def test_comma_lists_are_one_run_outside_multirun(tmp_path: Path) -> None:
    out = gpulane(
        "sweep",
        "ranks=2",
        "device=cpu",
        "collectives=all_reduce,broadcast",
        "dtype=float,int8",
        "sizes.min=1K",
        "sizes.max=1K",
        "iters=2",
        "results_dir=" + str(tmp_path),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    (run,) = run_dirs(tmp_path)
    rows = rows_of(run)
    assert {(r["op"], r["dtype"]) for r in rows} == {
        ("all_reduce", "float"),
        ("all_reduce", "int8"),
        ("broadcast", "float"),
        ("broadcast", "int8"),
    }
