"""JSON, JUnit and OpenMetrics say the same thing: they come from one document."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpulane.analysis.export import Document, collect, json_text, junit, openmetrics
from gpulane.analysis.export.schema import key_figures
from gpulane.analysis.store import frame_from_rows
from gpulane.record import Row

ROOT = Path(__file__).resolve().parents[3]
ACCEPT = ROOT / "benchmarks/accept/h200x2/nvlink"


def test_three_formats_agree_on_the_checks() -> None:
    doc = collect(ACCEPT)
    data = json.loads(json_text(doc))
    fails = [c for c in data["checks"] if c["status"] == "fail"]
    suite = ET.fromstring(junit(doc)).find("testsuite")
    assert suite is not None and int(suite.get("failures", -1)) == len(fails) > 0
    metrics = openmetrics(doc)
    zeros = [
        ln
        for ln in metrics.splitlines()
        if ln.startswith("gpulane_accept_check_passed{") and ln.endswith(" 0.0")
    ]
    assert len(zeros) == len({(c["rule"], c["subject"], c["basis"]) for c in fails})
    assert data["accepts"] == {str(ACCEPT): "FAIL"}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_key_figure_is_the_largest_size_per_op_and_machine(n: int) -> None:
    rows = []
    for build, gpu in (("a", "NVIDIA H200"), ("b", "NVIDIA H100 80GB HBM3")):
        for size, bw in ((1 << 20, 50.0), (1 << 30, 300.0 + n)):
            rows.append(
                Row(
                    run_id=f"r-{build}",
                    kind="collective",
                    backend="nccl",
                    op="all_reduce",
                    build=build,
                    world_size=n,
                    size_bytes=size,
                    busbw_gbps=bw,
                    path="NV18",
                    versions={"gpu": gpu, "nccl": "2.28.9"},
                    started_at="2026-11-27T01:00:00+00:00",
                )
            )
    figs = key_figures(frame_from_rows(rows))
    assert sorted((f.labels["build"], f.labels["gpu_model"], f.value) for f in figs) == [
        ("a", "NVIDIA H200", (300.0 + n) * 1e9),
        ("b", "NVIDIA H100 80GB HBM3", (300.0 + n) * 1e9),
    ]
    assert all(f.labels["world_size"] == str(n) and f.labels["size"] == str(1 << 30) for f in figs)


def test_nothing_to_export_is_bad_input(tmp_path: Path) -> None:
    from gpulane.cli import main

    assert main(["export", str(tmp_path)]) == 2
    assert main(["export", str(tmp_path / "absent")]) == 2


def test_copy_per_gpu_and_pair_and_token_rates() -> None:
    at = "2026-11-27T01:00:00+00:00"
    rows = [
        Row(run_id="c", kind="copy", backend="torch", op=op, build="x", src=src, dst=dst,
            memory="pinned", size_bytes=size, algbw_gbps=bw, started_at=at,
            versions={"gpu": "NVIDIA H200", "driver": "580.95"})
        for op, src, dst in (("h2d", "host", "GPU0"), ("h2d", "host", "GPU1"), ("p2p", "GPU0", "GPU1"))
        for size, bw in ((1 << 20, 20.0), (1 << 28, 55.0))
    ]  # fmt: skip
    rows.append(Row(run_id="c", kind="tokens", backend="torch", op="decode", build="x",
                    model="llama", tp=2, pp=1, batch=8, tokens_per_s=1234.5, started_at=at))  # fmt: skip
    text = openmetrics(Document("t", figures=key_figures(frame_from_rows(rows))))
    copies = [ln for ln in text.splitlines() if ln.startswith("gpulane_copy_bandwidth")]
    assert len(copies) == 3 and all(ln.endswith(" 5.5e+010") or "5.5e+10" in ln for ln in copies)
    assert any('gpu="GPU1"' in ln and 'pair=""' in ln and 'driver="580.95"' in ln for ln in copies)
    assert any('pair="GPU0->GPU1"' in ln for ln in copies)
    tokens = [ln for ln in text.splitlines() if ln.startswith("gpulane_tokens_per_second{")]
    assert len(tokens) == 1 and 'tp="2"' in tokens[0] and tokens[0].endswith(" 1234.5")


@pytest.mark.parametrize(
    ("verdict", "value"), [("PASS", "1.0"), ("INCOMPLETE", "0.0"), ("FAIL", "0.0")]
)
def test_accept_verdict_as_written(tmp_path: Path, verdict: str, value: str) -> None:
    checks = [{"rule": "busbw", "status": "pass", "basis": "absolute", "subject": "-"}]
    (tmp_path / "accept.json").write_text(json.dumps({"status": verdict, "checks": checks}))
    text = openmetrics(collect(tmp_path))
    line = next(ln for ln in text.splitlines() if ln.startswith("gpulane_accept_passed{"))
    assert f'verdict="{verdict}"' in line and line.endswith(f" {value}")
