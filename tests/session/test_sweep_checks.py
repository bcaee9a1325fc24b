"""The sweep's front: what no rank could run is one line and exit 2 before any rank starts
(and leaves no run directory behind); what the ranks measure nothing of exits 1; what a
backend runs in one placement only is footnoted under the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpulane.collectives.backends.torch_dist import TorchBackend
from gpulane.collectives.plan import build_plan
from gpulane.config.load import typed
from gpulane.session.sweep_checks import bytes_per_rank
from tests.helpers import gpulane, local_job_config, rows_of, run_dirs

FAST = ["device=cpu", "sizes.min=8", "sizes.max=64", "iters=1", "warmup=0", "progress=false"]


def sweep(tmp_path: Path, *args: str) -> Any:
    return gpulane("sweep", *FAST, *args, f"results_dir={tmp_path / 'runs'}", cwd=tmp_path)


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("gpulane: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        # issue 19: printed only the header, wrote nothing and exited 0
        (
            ["collectives=all_reduce", "in_place=false"],
            [
                "in_place=false: backend torch cannot run all_reduce out-of-place",
                "torch.distributed's all_reduce is in-place only",
                "choose in_place=true or both",
                "backend=mpi",
            ],
        ),
        # in a list, all_reduce vanished: now the line names it and what is left
        (
            ["collectives=all_reduce,all_gather", "in_place=false"],
            [
                "cannot run all_reduce out-of-place",
                "drop all_reduce from collectives (collectives=all_gather)",
            ],
        ),
        (
            ["collectives=alltoall", "in_place=true"],
            ["in_place=true: backend torch cannot run alltoall in-place", "in_place=false"],
        ),
        (
            ["collectives=gather"],
            ["collectives: backend torch runs no gather", "choose backend=mpi"],
        ),
        # MPI's limits, before mpirun starts (they came wrapped twice from rank 0)
        (
            ["backend=mpi", "launcher=mpirun", "dtype=bfloat16"],
            ["backend=mpi cannot run all_reduce bfloat16: numpy has no bfloat16"],
        ),
        (
            ["backend=mpi", "launcher=mpirun", "redop=avg"],
            ["backend=mpi cannot run all_reduce float: MPI has no averaging reduction"],
        ),
        (
            ["backend=mpi"],
            ["backend=mpi needs ranks started by MPI", "add launcher=mpirun"],
        ),
        # host memory: 1 TiB buffers on a machine with far less
        (
            ["sizes.max=1T"],
            ["sizes.max=1T: all_reduce 1024 GiB float needs", "available; lower sizes.max"],
        ),
        (["collectives=broadcast", "root=5"], ["root: 5 is not a rank of a 2-rank run"]),
        # typed config: a group is not a value
        (["sizes=0"], ["sizes: a group of keys (sizes.KEY=VALUE), not a value; got 0"]),
    ],
)
def test_bad_input_is_one_line_before_any_rank(
    tmp_path: Path, args: list[str], words: list[str]
) -> None:
    out = sweep(tmp_path, *args)
    assert out.returncode == 2, out.stdout + out.stderr
    line = one_error_line(out.stderr)
    for w in words:
        assert w in line
    # nothing started: no header, no run directory left behind
    assert "# gpulane sweep:" not in out.stdout
    runs = tmp_path / "runs"
    assert not runs.exists() or run_dirs(runs) == []


def test_not_measured_placement_is_footnoted(tmp_path: Path) -> None:
    """The default job (all_reduce, both placements) on torch: the out-of-place half is
    n/a, and a footnote says why; the rows say it too."""
    out = sweep(tmp_path)
    assert out.returncode == 0, out.stderr
    assert "n/a" in out.stdout
    assert "# n/a: all_reduce out-of-place: torch.distributed's all_reduce is in-place only" in (
        out.stdout
    )
    (run,) = run_dirs(tmp_path / "runs")
    rows = rows_of(run)
    assert rows and all(r["in_place"] for r in rows)
    assert {str(r["extra"]["not_measured"]) for r in rows} == {
        str({"out-of-place": "torch.distributed's all_reduce is in-place only"})
    }


def nothing_job(cfg: Any, ctx: Any) -> None:
    """Ranks that start, beat and end well, but measure nothing."""
    ctx.heartbeat(0, "done")


def test_a_run_that_measured_nothing_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpulane.rundir import make_run_dir, save_config
    from gpulane.session.sweep import launch_job

    cfg = local_job_config(tmp_path, timeout_s=60)
    run = make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=2)
    status = launch_job(saved, run, {}, "tests.session.test_sweep_checks:nothing_job", 2, "cpu")
    assert status == 1
    assert "gpulane: error: nothing was measured" in capsys.readouterr().err
    assert not run.rows_path.exists() or rows_of(run.path) == []


def test_bytes_per_rank_counts_the_buffers_a_placement_needs() -> None:
    """all_reduce of 1 MiB floats in place: one 1 MiB buffer per rank, plus the check's
    index arrays (4 x 8 B per element up to a chunk)."""
    from gpulane.config.commands import SweepConfig

    cfg = typed(
        {"backend": {"name": "torch"}, "sizes": {"min": "1M", "max": "1M"}, "in_place": "both"},
        SweepConfig,
    )
    plan = build_plan(cfg, on_device=False)
    need, where = bytes_per_rank(plan, 2, TorchBackend)
    elements = (1 << 20) // 4
    assert need == (1 << 20) + 32 * elements
    assert where == "all_reduce 1 MiB float"
    # Out of place as well (a backend that runs both): send and receive buffers.
    need_both, _ = bytes_per_rank(plan, 2, None)
    assert need_both == 2 * (1 << 20) + 32 * elements
