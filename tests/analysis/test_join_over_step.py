"""An estimated collective share over 100 % of the step is explained, not printed bare."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.analysis.join import join_rows, over_step
from gpulane.commands.join import main
from gpulane.record import Row, RowWriter


def coll(size: int, t: float) -> Row:
    return Row(run_id="s", kind="collective", backend="torch-gloo", op="all_reduce",
               build="vm", world_size=2, dtype="bfloat16", size_bytes=size, time_us=t,
               busbw_gbps=size / t / 1e3)  # fmt: skip


def tok(step_us: float, share: float | None) -> Row:
    # 65 all-reduces of 8 KiB a step: at 40 us each, 2.6 ms of collectives
    return Row(run_id="t", kind="tokens", backend="torch-gloo", op="decode", build="vm",
               world_size=2, model="llama3-8b", tp=2, pp=1, batch=1, input_len=512,
               output_len=16, time_us=step_us, tokens_per_s=1e6 / step_us, comm_share=share,
               extra={"comm_per_step": [{"op": "all_reduce", "count": 65,
                                         "size_bytes": 8192}]})  # fmt: skip


def rows(step_us: float, share: float | None = None) -> list[Row]:
    return [coll(8192, 40.0), coll(65536, 80.0), tok(step_us, share)]


def test_share_over_the_step_is_explained() -> None:
    (j,) = join_rows(rows(step_us=858.0, share=0.31))  # 2.6 ms of comm in a 0.858 ms step
    assert j.comm_share_est == pytest.approx(2.6 / 0.858)
    assert j.over_step is not None
    assert j.over_step.startswith("comm time 2.6 ms exceeds the 0.858 ms step (303%)")
    assert "the estimate is off" in j.over_step and "overlaps them with compute" in j.over_step
    assert "own measured share is 31%" in j.over_step


def test_share_within_the_step_has_no_explanation() -> None:
    (j,) = join_rows(rows(step_us=5200.0))
    assert j.comm_share_est == pytest.approx(0.5)
    assert j.over_step is None
    assert over_step(1.0, 1.0, False, None) is None  # exactly the step: possible
    assert over_step(None, 1.0, False, None) is None  # nothing estimated
    assert "outside the measured range" in str(over_step(2.0, 1.0, True, None))


def test_command_marks_and_explains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RowWriter(tmp_path / "run1") as w:
        for r in rows(step_us=858.0):
            w.write(r)
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "303%!" in out
    assert "# !: llama3-8b decode tp=2 batch 1: comm time 2.6 ms exceeds the 0.858 ms step" in out
