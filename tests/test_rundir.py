"""The run directory: made by every rank of an outer launcher at once without tripping on
each other, and removed again when bad input stops a run before anything ran in it."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError
from gpulane.rundir import discard_unused, discarded_on_bad_input, make_run_dir, save_config


def _make(root: str, run_id: str, barrier: object, errors: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    try:
        make_run_dir(SweepConfig(results_dir=root, build="t"), run_id=run_id)
    except InputError as err:
        errors.put(str(err))  # type: ignore[attr-defined]


def test_ranks_making_one_run_dir_at_once_never_fail(tmp_path: Path) -> None:
    """Issue 19: under the user's mpirun, rank 1 failed with `cannot write run directory
    ...: No such file or directory` (rank 0 removed the shared write probe under it).
    Two processes released together make the same directory, 60 times over."""
    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    for i in range(60):
        barrier = ctx.Barrier(2)
        procs = [
            ctx.Process(target=_make, args=(str(tmp_path), f"mpi-{i}", barrier, errors))
            for _ in range(2)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"mpi-{i}" for i in range(60))
    assert not list(tmp_path.glob("*/.writable*"))


def test_a_run_dir_bad_input_stopped_is_removed(tmp_path: Path) -> None:
    cfg = SweepConfig(results_dir=str(tmp_path), build="t")
    run = make_run_dir(cfg)
    save_config(cfg, run)
    (run.path / "logs").mkdir()  # folders made for the ranks, still empty
    (run.path / "nccl").mkdir()
    with pytest.raises(InputError), discarded_on_bad_input(run):
        raise InputError("root: 5 is not a rank of a 2-rank run")
    assert not run.path.exists()


def test_a_run_dir_with_rows_or_logs_is_kept(tmp_path: Path) -> None:
    cfg = SweepConfig(results_dir=str(tmp_path), build="t")
    kept = make_run_dir(cfg)
    (kept.path / "rows.jsonl").write_text('{"run_id": "x"}\n')
    assert not discard_unused(kept) and kept.rows_path.exists()
    logged = make_run_dir(cfg)
    (logged.path / "logs").mkdir()
    (logged.path / "logs" / "rank-0.log").write_text("started\n")
    assert not discard_unused(logged) and logged.path.exists()
