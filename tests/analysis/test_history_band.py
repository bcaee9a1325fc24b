"""The noise band of `gpulane history` comes from the earlier runs only (issue 44.3):
real 4x H200 rows (benchmarks/slurm/h200x4), five runs, the last one halved from 128 KiB
up under a newer NCCL, is a regression; a run inside the earlier runs' range is not."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from gpulane.analysis.history import detect
from gpulane.cli import main

ROOT = Path(__file__).resolve().parents[2]
# the two local 4x H200 runs, kept packed as runs/local.zip (benchmarks/archive.py)
with zipfile.ZipFile(ROOT / "benchmarks/slurm/h200x4/runs/local.zip") as _zf:
    REAL = [_zf.read(n).decode() for n in sorted(_zf.namelist()) if n.endswith("/rows.jsonl")]
KIB128 = 128 << 10


def _real_runs(root: Path, halve_last: bool) -> list[str]:
    """Five runs from the two real 4x H200 runs (alternating); the last one's figures at
    128 KiB and up halved and NCCL 2.28.9 -> 2.29.2 when ``halve_last``."""
    assert len(REAL) == 2
    ids = []
    for i in range(5):
        run_id = f"2026112{i}-000000-local-{i:04d}"
        last = halve_last and i == 4
        lines = []
        for text in REAL[i % 2].splitlines():
            row = json.loads(text)
            row["run_id"] = run_id
            row["started_at"] = f"2026-11-2{i}T06:46:43+00:00"
            if last:
                row["versions"]["nccl"] = "2.29.2"
                if (row.get("size_bytes") or 0) >= KIB128:
                    for k in ("busbw_gbps", "algbw_gbps"):
                        if row.get(k) is not None:
                            row[k] /= 2
                    for k in ("time_us", "time_us_p50", "time_us_p99"):
                        if row.get(k) is not None:
                            row[k] *= 2
            lines.append(json.dumps(row))
        (root / run_id).mkdir(parents=True)
        (root / run_id / "rows.jsonl").write_text("\n".join(lines) + "\n")
        ids.append(run_id)
    return ids


def test_a_halved_last_run_of_five_real_h200_runs_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _real_runs(tmp_path, halve_last=True)
    assert main(["history", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("REGRESSION")]
    assert lines, out
    assert all(f"first in run {ids[4]}" in ln for ln in lines)
    assert any("nccl 2.28.9 → 2.29.2" in ln and "all_reduce" in ln for ln in lines)
    assert "from the earlier runs" in lines[0]


def test_the_same_real_runs_unchanged_are_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _real_runs(tmp_path, halve_last=False)
    assert main(["history", str(tmp_path)]) == 0
    assert "no regression beyond the runs' noise" in capsys.readouterr().out


def test_the_judged_runs_own_noise_does_not_widen_the_band() -> None:
    # the verdict on the last run is the same whatever that run's own noise is
    values = [100, 100.2, 50]
    quiet, noisy = detect(values, [0.004, 0.9, 0.0]), detect(values, [0.004, 0.9, 0.99])
    assert quiet[0] == 2 and noisy == quiet


def test_the_earlier_runs_range_widens_the_band() -> None:
    # earlier runs swing 80..100 with quiet repeats: 79 lies within their own range, and a
    # band from the runs' repeats alone (0.2 %) would wrongly flag it
    values, noise = [80, 100, 80, 100, 79.0], [0.002] * 5
    assert detect(values, noise) == (None, None)
    # but far below that range it is flagged, with the band the earlier range gives
    k, band = detect([80, 100, 80, 100, 50], noise)
    assert k == 4 and band == pytest.approx(20)
