"""gpulane history: a planted regression is flagged at the run it appeared, with what
changed there; changes within the runs' own noise stay quiet; exit statuses."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gpulane.analysis.history import detect, load_runs, series
from gpulane.cli import main
from gpulane.parquet_rows import write_parquet
from gpulane.record import Row, RowWriter

GIB = 1 << 30


def make_results(
    root: Path,
    values: list[float],
    n: int = 4,
    new_nccl_at: int | None = None,
    spread: float = 0.01,
) -> list[str]:
    """One run per value, 3 repeat rows each (spread apart), p50/p99 as timed rows carry
    them; every other run only as JSON Lines (a run that never wrote Parquet)."""
    rng = random.Random(7)
    ids = []
    for i, v in enumerate(values):
        run_id = f"2026112{i % 10}-0{i // 10}0000-nvlink-{i:04d}"
        nccl = "2.29.1" if new_nccl_at is not None and i >= new_nccl_at else "2.28.9"
        w = RowWriter(root / run_id)
        for rep in range(3):
            bw = v * (1 + spread * (rep - 1)) * (1 + rng.uniform(-0.001, 0.001))
            t = GIB / (bw * 1e9) * 1e6 * 2 * (n - 1) / n
            w.write(
                Row(
                    run_id=run_id,
                    kind="collective",
                    backend="nccl",
                    op="all_reduce",
                    build="nvlink",
                    host="node1",
                    world_size=n,
                    size_bytes=GIB,
                    dtype="float",
                    time_us=t,
                    time_us_p50=t,
                    time_us_p99=t * 1.004,
                    busbw_gbps=bw,
                    path="NV18",
                    started_at=f"2026-11-{10 + i:02d}T01:00:0{rep}+00:00",
                    env={"NCCL_NVLS_ENABLE": "0"},
                    versions={
                        "nccl": nccl,
                        "cuda": "13.0",
                        "driver": "580.1",
                        "gpu": "NVIDIA H200",
                    },
                )
            )
        w.close()
        if i % 2 == 0:
            write_parquet(root / run_id)
        ids.append(run_id)
    return ids


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_planted_regression_is_flagged_where_it_appeared(
    tmp_path: Path, n: int, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = make_results(tmp_path, [340, 342, 339, 341, 300, 301, 299], n=n, new_nccl_at=4)
    assert main(["history", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("REGRESSION"))
    assert f"first in run {ids[4]}" in line
    assert "nccl 2.28.9 → 2.29.1" in line
    assert f"{n} ranks" in line


def test_changes_within_noise_stay_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # runs wander by up to 1.5 % while their own repeats spread 2 %: nothing to flag
    make_results(tmp_path, [340, 337, 342, 336, 341, 335.5, 339], spread=0.01)
    assert main(["history", str(tmp_path)]) == 0
    assert "no regression beyond the runs' noise" in capsys.readouterr().out


def test_a_lone_dip_that_recovers_is_not_a_regression(tmp_path: Path) -> None:
    make_results(tmp_path, [340, 341, 300, 340, 341, 339])
    assert all(s.regression is None for s in series(load_runs(tmp_path)))


def test_the_band_comes_from_the_runs_not_a_fixed_percentage() -> None:
    # the same 3 % drop: flagged when the runs are steady, not when they are noisy
    assert detect([100, 100.2, 99.9, 97, 97], [0.002] * 5)[0] == 3
    assert detect([100, 100.2, 99.9, 97, 97], [0.05] * 5)[0] is None
    # no noise measure at all: not judged
    assert detect([100, 90], [0.0, 0.0])[0] is None


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", str(tmp_path / "absent")]) == 2
    assert main(["history", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("gpulane: error:") == 2


def test_filters_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_results(tmp_path / "runs", [340, 341, 300, 299], new_nccl_at=2)
    assert main(["history", str(tmp_path / "runs"), "--op", "all_gather"]) == 2
    capsys.readouterr()
    plot = tmp_path / "h.png"
    assert main(["history", str(tmp_path / "runs"), "--build", "nv*", "--plot", str(plot)]) == 1
    assert plot.stat().st_size > 1000


def test_report_has_a_history_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    make_results(runs, [340, 342, 339, 300, 301], new_nccl_at=3)
    page = tmp_path / "r.html"
    assert main(["report", str(runs), "--history", str(runs), "-o", str(page)]) == 0
    html = page.read_text()
    assert 'id="history"' in html and 'id="plot-history"' in html
    assert "REGRESSION nvlink all_reduce float 1 GiB" in html and "nccl 2.28.9 → 2.29.1" in html


def test_a_run_cut_short_is_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = make_results(tmp_path, [340, 342, 339, 300, 301], new_nccl_at=3)
    rows = tmp_path / ids[1] / "rows.jsonl"  # odd runs have no Parquet: JSON Lines only
    rows.write_text(rows.read_text()[:-40])
    assert main(["history", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert f"first in run {ids[3]}" in captured.out and "over 5 runs" in captured.out
    assert "skipped its last line" in captured.err
