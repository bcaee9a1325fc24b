"""`gpulane export` publishes only like with like (issue 44.2): one series per machine
under a build label, P2P on/off and one direction/both labelled, and an interrupted run
is never "the latest"."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from gpulane.analysis.export import collect
from gpulane.cli import main

ROOT = Path(__file__).resolve().parents[3]
P2P = (
    ROOT
    / "tests/fixtures/public/bandwidthtest/stelline_asus_4xRTX6000Ada_p2pBandwidthLatencyTest.txt"
)
# the two local 4x H200 runs, kept packed as runs/local.zip (benchmarks/archive.py)
with zipfile.ZipFile(ROOT / "benchmarks/slurm/h200x4/runs/local.zip") as _zf:
    H200 = next(_zf.read(n).decode() for n in sorted(_zf.namelist()) if n.endswith("/rows.jsonl"))


def _copy(root: Path, run_id: str, started: str, scale: float = 1.0, **fields: object) -> None:
    lines = []
    for text in H200.splitlines():
        row = dict(json.loads(text), run_id=run_id, build="nvlink", started_at=started, **fields)
        for k in ("busbw_gbps", "algbw_gbps"):
            if row.get(k) is not None:
                row[k] *= scale
        lines.append(json.dumps(row))
    (root / run_id).mkdir(parents=True)
    (root / run_id / "rows.jsonl").write_text("\n".join(lines) + "\n")


def _all_reduce(doc_figures: list, **labels: str) -> list:
    return [
        f
        for f in doc_figures
        if f.metric == "collective_busbw" and f.labels["op"] == "all_reduce"
        and all(f.labels.get(k) == v for k, v in labels.items())
    ]  # fmt: skip


def test_two_machines_under_one_label_are_two_series(tmp_path: Path) -> None:
    _copy(tmp_path, "20261120-000000-nvlink-a", "2026-11-20T00:00:00+00:00")
    # a later CPU run under the same label must not replace the H200's figure
    _copy(tmp_path, "20261121-000000-nvlink-b", "2026-11-21T00:00:00+00:00", 0.001,
          host="vm", backend="torch-gloo", versions={"gpulane": "0.1.0"})  # fmt: skip
    figs = collect(tmp_path).figures
    h200 = _all_reduce(figs, gpu_model="NVIDIA H200")
    cpu = _all_reduce(figs, backend="torch-gloo")
    assert len(h200) == 1 and len(cpu) == 1
    assert h200[0].run_id.endswith("-a") and h200[0].value > 100 * cpu[0].value


def test_an_interrupted_run_is_never_the_latest(tmp_path: Path) -> None:
    _copy(tmp_path, "20261120-000000-nvlink-a", "2026-11-20T00:00:00+00:00")
    _copy(tmp_path, "20261121-000000-nvlink-b", "2026-11-21T00:00:00+00:00", 0.5)
    cut = tmp_path / "20261121-000000-nvlink-b" / "rows.jsonl"
    error = dict(json.loads(cut.read_text().splitlines()[0]), status="error",
                 error="interrupted", busbw_gbps=None, algbw_gbps=None)  # fmt: skip
    cut.write_text(cut.read_text() + json.dumps(error) + "\n")
    (fig,) = _all_reduce(collect(tmp_path).figures)
    assert fig.run_id.endswith("-a")


def test_p2p_figures_say_what_they_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "p2p", str(P2P), "--out", str(tmp_path / "r"), "--build", "ada"]) == 0
    capsys.readouterr()
    pair = [f for f in collect(tmp_path).figures if f.labels.get("pair") == "GPU0->GPU1"]
    kinds = {(f.labels["p2p"], f.labels["direction"]) for f in pair}
    assert kinds == {("on", "one"), ("off", "one"), ("on", "both (sum)"), ("off", "both (sum)")}
    assert len(pair) == 4
