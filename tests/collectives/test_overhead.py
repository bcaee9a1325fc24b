"""The torch_overhead pass on real ranks (gloo stands in for NCCL on this CPU machine: the
rounds, the mean over ranks, the median and the file are what is checked) and the summary
line it gives."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from gpulane.collectives.harness import Timing
from gpulane.collectives.overhead import (
    OVERHEAD_FILE,
    ROUNDS,
    measure_torch_overhead,
    overhead_line,
)
from gpulane.collectives.table import SweepView
from gpulane.config.commands import SweepConfig
from gpulane.config.load import typed
from gpulane.rank import RankContext
from gpulane.record import Row, RowWriter, row_of
from gpulane.rundir import make_run_dir, save_config
from gpulane.session.sweep import launch_job


def overhead_job(cfg: SweepConfig, ctx: RankContext) -> None:
    from gpulane.collectives.backends.torch_dist import TorchBackend

    backend = TorchBackend(ctx, device="cpu")
    try:
        measure_torch_overhead(backend, Timing(warmup=1, iters=5), ctx.run_dir, "gloo")
        if ctx.is_leader:  # one row, so that the session has a measured point to conclude
            with RowWriter(ctx.run_dir) as w:
                w.write(Row(run_id=str(cfg.run_id), kind="collective", backend="x", op="x"))
    finally:
        backend.close()


def test_pass_on_real_ranks_writes_the_figures(tmp_path: Path) -> None:
    cfg = typed(
        {
            "results_dir": str(tmp_path),
            "backend": {"name": "torch"},
            "launcher": {"name": "local"},
            "device": "cpu",
            "progress": False,
            "timeout_s": 120,
        },
        SweepConfig,
    )
    run = make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=2, device="cpu", nodes=1)
    code = launch_job(saved, run, {}, "tests.collectives.test_overhead:overhead_job", 2, "cpu")
    assert code == 0
    data = json.loads((run.path / OVERHEAD_FILE).read_text())
    assert [s["size_bytes"] for s in data["sizes"]] == [8, 1 << 20]
    for s in data["sizes"]:
        assert len(s["nccl_us"]) == len(s["torch_us"]) == ROUNDS
        assert all(t > 0 for t in s["nccl_us"] + s["torch_us"])
        added = [t - n for t, n in zip(s["torch_us"], s["nccl_us"], strict=True)]
        assert s["added_us"] == pytest.approx(statistics.median(added))
    line = overhead_line(run.path)
    assert line is not None and line.startswith("# torch.distributed adds ")


def test_summary_line(tmp_path: Path) -> None:
    sizes: list[dict[str, Any]] = [
        {"size_bytes": 8, "nccl_us": [7.0, 6.5, 9.0], "torch_us": [43, 41.7, 50], "added_us": 35.2},
        {
            "size_bytes": 1 << 20,
            "nccl_us": [15, 15.5, 16],
            "torch_us": [46, 47, 45],
            "added_us": 31,
        },
    ]
    (tmp_path / OVERHEAD_FILE).write_text(json.dumps({"rounds": 3, "sizes": sizes}))
    view = SweepView(1, 2, tmp_path)
    rows = [row_of({"time_us": 1.0, "busbw_gbps": 2.0})]
    assert view.summary(rows)[-1] == (
        "# torch.distributed adds 35.2 µs per call at 8 B, 31.0 µs at 1 MiB (this run: "
        "all_reduce in place, torch vs backend=nccl 43.0 vs 7.0 µs, 46.0 vs 15.5 µs, "
        "median of 3 rounds)"
    )
    assert overhead_line(tmp_path / "elsewhere") is None
    assert SweepView(1, 2).summary(rows) == ["# Avg bus bandwidth    : 2.0000 GB/s over 1 rows"]
