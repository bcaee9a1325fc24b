"""`gpulane history` keeps apart what compare keeps apart (issue 44.2): machines under one
build label, P2P on and off, one direction and both (real p2pBandwidthLatencyTest and
4x H200 rows)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from gpulane.analysis.history import load_runs, series
from gpulane.cli import main

ROOT = Path(__file__).resolve().parents[2]
P2P = (
    ROOT
    / "tests/fixtures/public/bandwidthtest/stelline_asus_4xRTX6000Ada_p2pBandwidthLatencyTest.txt"
)
# the two local 4x H200 runs, kept packed as runs/local.zip (benchmarks/archive.py)
with zipfile.ZipFile(ROOT / "benchmarks/slurm/h200x4/runs/local.zip") as _zf:
    H200 = next(_zf.read(n).decode() for n in sorted(_zf.namelist()) if n.endswith("/rows.jsonl"))


def test_p2p_matrices_are_separate_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(2):
        out = tmp_path / f"2026112{i}-000000-p2p-{i}"
        assert main(["parse", "p2p", str(P2P), "--out", str(out), "--build", "ada"]) == 0
    capsys.readouterr()
    pair = [
        s
        for s in series(load_runs(tmp_path))
        if s.key.get("src") == "GPU0" and s.key.get("dst") == "GPU1"
    ]
    labels = {s.label() for s in pair}
    # P2P off and on, one direction and both: four measurements, four series
    assert len(pair) == len(labels) == 4, labels
    assert any("P2P off" in x and "both directions (sum)" in x for x in labels)
    assert any("P2P on" in x and "both" not in x for x in labels)
    for s in pair:  # each series is one measurement: its runs hold one figure each
        assert set(s.runs["n"]) == {1}


def test_two_machines_under_one_label_are_not_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [json.loads(t) for t in H200.splitlines()]
    for i, (gpu, host, backend, scale) in enumerate(
        [("NVIDIA H200", "h200-a", "nccl", 1.0), ("NVIDIA H200", "h200-a", "nccl", 1.0),
         (None, "vm", "torch-gloo", 0.005)]
    ):  # fmt: skip
        run_id = f"2026112{i}-000000-nvlink-{i}"
        lines = []
        for row in rows:
            row = dict(row, run_id=run_id, build="nvlink", host=host, backend=backend)
            row["started_at"] = f"2026-11-2{i}T06:00:00+00:00"
            row["versions"] = {k: v for k, v in row["versions"].items() if k != "gpu"}
            if gpu:
                row["versions"]["gpu"] = gpu
            for k in ("busbw_gbps", "algbw_gbps"):
                if row.get(k) is not None:
                    row[k] *= scale
            lines.append(json.dumps(row))
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "rows.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["history", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "REGRESSION" not in out
    assert "[NVIDIA H200, h200-a, nccl]" in out and "[cpu, vm, torch-gloo]" in out


def test_token_series_of_one_model_read_apart(tmp_path: Path) -> None:
    """Two token figures of one model at other batches and prompt lengths: their labels
    name the shape (the README walk found several "vm prefill bfloat16 tiny 2 ranks"
    lines with other figures and no way to tell them apart)."""
    from gpulane.record import Row, RowWriter

    for i in range(2):
        run = tmp_path / f"2026112{i}-000000-vm-{i}"
        run.mkdir()
        with RowWriter(run) as out:
            for batch, input_len in ((1, 512), (8, 512), (8, 2048)):
                row = Row(
                    run_id=run.name, kind="tokens", backend="torch", op="prefill",
                    build="vm", host="vm", world_size=2, dtype="bfloat16", model="tiny",
                    tp=2, pp=1, batch=batch, input_len=input_len, output_len=32,
                    tokens_per_s=100.0 * batch, started_at=f"2026-11-2{i}T06:00:00+00:00",
                )  # fmt: skip
                out.write(row)
    labels = [s.label() for s in series(load_runs(tmp_path)) if s.metric == "tokens_per_s"]
    assert len(labels) == len(set(labels)) == 3, labels
    assert any("tp=2 pp=1 batch=8 in=2048 out=32" in x for x in labels), labels
