"""Tokens rows beside collective rows of the same build, at the model's all-reduce sizes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpulane.analysis.join import build_curves, join_frame, join_rows
from gpulane.commands.join import main
from gpulane.record import Row, RowWriter


def coll(build: str, size: int, t: float, n: int = 2, dtype: str = "bfloat16") -> Row:
    return Row(run_id="s", kind="collective", backend="torch-nccl", op="all_reduce",
               build=build, world_size=n, dtype=dtype, size_bytes=size, time_us=t,
               busbw_gbps=size / t / 1e3)  # fmt: skip


def tok(build: str, batch: int, step_us: float, share: float | None = 0.2) -> Row:
    size = batch * 4096 * 2
    return Row(run_id="t", kind="tokens", backend="torch-nccl", op="decode", build=build,
               world_size=2, model="llama3-8b", tp=2, pp=1, batch=batch, input_len=512,
               output_len=128, time_us=step_us, tokens_per_s=batch / step_us * 1e6,
               comm_share=share,
               extra={"comm_per_step": [{"op": "all_reduce", "count": 65, "size_bytes": size},
                                        {"op": "all_gather", "count": 1, "size_bytes": 999}]})  # fmt: skip


def rows() -> list[Row]:
    out = [coll("nvlink", s, t) for s, t in ((8192, 10.0), (65536, 20.0), (524288, 40.0))]
    out += [coll("nvlink", 65536, 99.0, dtype="float")]  # another dtype: not mixed in
    out += [coll("socket", s, t) for s, t in ((8192, 100.0), (524288, 900.0))]
    out += [coll("socket", 8192, 50.0, n=4)]  # other world size: not used for tp=2
    out += [tok("nvlink", 1, 5000.0), tok("nvlink", 8, 6000.0), tok("socket", 16, 20000.0)]
    out += [tok("riser", 1, 7000.0)]
    return out


def test_curves_by_build_op_and_world() -> None:
    curves = build_curves(rows())
    assert set(curves) == {
        ("nvlink", "all_reduce", 2),
        ("socket", "all_reduce", 2),
        ("socket", "all_reduce", 4),
    }
    assert curves[("nvlink", "all_reduce", 2)].times_us == (10.0, 20.0, 40.0)
    assert curves[("nvlink", "all_reduce", 2)].dtype == "bfloat16"


def test_join_interpolates_on_the_same_builds_curve() -> None:
    joined = [j for j in join_rows(rows()) if j.collective == "all_reduce"]
    by = {(j.build, j.batch): j for j in joined}
    exact = by[("nvlink", 1)]
    assert exact.size_bytes == 8192 and exact.collective_us == 10.0 and not exact.extrapolated
    assert exact.comm_ms_per_step == pytest.approx(65 * 10.0 / 1e3)
    assert exact.comm_share_est == pytest.approx(0.65 / 5.0)
    assert exact.comm_share == 0.2 and exact.tokens_per_s == pytest.approx(200.0)
    # 65536 B measured on nvlink: 20 us; socket's 131072 B between 8192 and 524288, log-log
    assert by[("nvlink", 8)].collective_us == pytest.approx(20.0)
    sock = by[("socket", 16)]
    frac = math.log(131072 / 8192) / math.log(524288 / 8192)
    assert sock.collective_us == pytest.approx(math.exp(math.log(100) + frac * math.log(9)))
    assert sock.busbw_gbps == pytest.approx(131072 / sock.collective_us / 1e3)
    # a build without a sweep gets a note, not a guess
    riser = by[("riser", 1)]
    assert riser.collective_us is None and "no all_reduce rows of build riser" in (riser.note or "")


def test_outside_the_measured_sizes_is_flagged() -> None:
    data = [coll("b", 65536, 20.0), coll("b", 131072, 30.0), tok("b", 1, 100.0)]
    (j,) = [j for j in join_rows(data) if j.collective == "all_reduce"]
    assert j.extrapolated and j.collective_us == 20.0 and "outside" in (j.note or "")


def test_join_frame_and_build_filter() -> None:
    import pandas as pd

    frame = join_frame(pd.DataFrame([r.to_dict() for r in rows()]), builds=["socket"])
    assert set(frame["build"]) == {"socket"}
    assert set(frame["collective"]) == {"all_reduce", "all_gather"}


def test_command_over_run_dirs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RowWriter(tmp_path / "run1") as w:
        for r in rows():
            w.write(r)
    assert main([str(tmp_path), "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 8  # 4 tokens rows x (all_reduce, all_gather)
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "nvlink" in out and "socket" in out and "all_reduce" in out


def test_dashes_say_why_when_builds_differ(tmp_path: Path) -> None:
    """Token rows of one build, collective rows of another (the recorded 2xH200 runs):
    every cell is '-', and the command says why and what to do."""
    import shutil

    from tests.helpers import gpulane
    from tests.report_pages import BENCH

    builds = BENCH / "inference/h200x2/builds"
    shutil.copytree(builds / "20261122-032835-nvlink-2755", tmp_path / "runs/tokens")
    shutil.copytree(builds / "20261122-032945-pcie-host-e43c", tmp_path / "runs/sweep")
    proc = gpulane("join", str(tmp_path / "runs"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (
        "# -: no all_reduce rows of build nvlink over 2 ranks (the rows have build pcie-host "
        "over 2 ranks); label both runs with the same build=LABEL to join them"
    ) in proc.stdout
    assert (
        "# -: no all_gather rows of build nvlink over 2 ranks, and no all_gather rows of any build"
        in proc.stdout
    )
    assert "-%" not in proc.stdout
