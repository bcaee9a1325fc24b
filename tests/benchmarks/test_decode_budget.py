"""decode_budget.py: what each of issue 32's targets leaves of a decode step once its
products run as fast as they do alone, from profile_decode.py's documents of 1 to 8 GPUs'
slices, H100 and H200 profiles side by side, and floor_probe.py's products."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.inference import decode_budget as db

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "inference" / "decode_budget.py"


def run(
    batch: int,
    step: float,
    roof: float,
    products: float,
    attention: float,
    other: float,
    count: int,
    variant: str = "compiled:fused",
) -> dict[str, Any]:
    return {
        "batch": batch, "variant": variant, "step_ms": step, "roofline_ms": roof,
        "kernels": {"count": count, "busy_ms": products + attention + other, "groups": {
            "matrix products": {"count": count // 2, "ms": products},
            "attention": {"count": 32, "ms": attention},
            "other": {"count": count - count // 2 - 32, "ms": other},
        }},
    }  # fmt: skip


def profile(
    model: str,
    tp: int,
    runs: list[dict[str, Any]],
    gemm_only: dict[str, float],
    layers: int = 32,
    gpu: str = "NVIDIA H100 80GB HBM3",
    copy: float = 3000.0,
) -> dict[str, Any]:
    return {
        "gpu": gpu, "model": model, "tp": tp, "layers": layers, "copy_gbps": copy,
        "decode": runs, "gemm_only_ms": gemm_only,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("model", "tp", "want"),
    [
        ("llama3-8b", 1, 1.2), ("llama3-8b", 2, 1.3), ("llama3-8b", 3, None),
        ("llama3-8b", 4, 1.6), ("llama3-8b", 8, None), ("qwen2.5-72b", 1, 1.2),
        ("qwen2.5-72b", 2, 1.2), ("qwen2.5-72b", 3, None), ("qwen2.5-72b", 4, 1.2),
        ("qwen2.5-72b", 8, None), ("llama3-70b", 4, 1.2), ("mixtral-8x7b", 2, None),
    ],
)  # fmt: skip
def test_targets_are_issue_32s_by_model_and_tp(model: str, tp: int, want: float | None) -> None:
    assert db.target(model, tp) == want


def test_a_row_is_the_median_of_the_variants_runs_and_the_budget_follows() -> None:
    doc = profile(
        "llama3-8b", 4,
        [
            run(1, 2.30, 1.30, 1.66, 0.30, 0.23, 310),
            run(1, 2.40, 1.30, 1.70, 0.31, 0.25, 310),
            run(1, 2.20, 1.30, 1.60, 0.29, 0.21, 310),
            run(1, 9.99, 1.30, 9.00, 0.30, 0.23, 999, variant="compiled:bmm"),
            {"batch": 1, "variant": "compiled:fused", "error": "cut"},
        ],
        {"1": 1.72},
    )  # fmt: skip
    (row,) = db.budget_rows(doc, "compiled:fused")
    assert row["runs"] == 3 and row["step_ms"] == pytest.approx(2.30)
    assert row["products_ms"] == pytest.approx(1.66) and row["other_ms"] == pytest.approx(0.23)
    assert row["gaps_ms"] == pytest.approx(2.30 - 1.66 - 0.30 - 0.23)
    assert row["target"] == 1.6 and row["allowed_ms"] == pytest.approx(1.6 * 1.30)
    # what the target leaves once the products run as fast as alone, and what the rest takes
    assert row["left_for_rest_ms"] == pytest.approx(1.6 * 1.30 - 1.72)
    assert row["rest_ms"] == pytest.approx(2.30 - 1.72)
    cost = (2.30 - 1.30) / 310 * 1e3
    assert row["us_per_kernel"] == pytest.approx(cost)
    allowed = (0.6 * 1.30 * 1e3 / cost - db.FIXED_KERNELS) / 32
    assert row["kernels_per_layer_allowed"] == pytest.approx(allowed)
    assert row["kernels_per_layer"] == pytest.approx(310 / 32)
    assert db.budget_rows(doc, "compiled:triton") == []


def test_a_stated_rate_rescales_the_roofline() -> None:
    doc = profile("llama3-8b", 1, [run(16, 5.2, 4.0, 4.0, 0.7, 0.3, 333)], {"16": 4.1},
                  gpu="NVIDIA H200", copy=4247.0)  # fmt: skip
    (at_copy,) = db.budget_rows(doc, "compiled:fused")
    (at_4000,) = db.budget_rows(doc, "compiled:fused", gbps=4000.0)
    assert at_4000["roofline_ms"] == pytest.approx(4.0 * 4247 / 4000)
    assert at_4000["ratio"] < at_copy["ratio"]
    assert at_4000["allowed_ms"] == pytest.approx(1.2 * 4.0 * 4247 / 4000)


def test_the_probes_products_add_up_to_a_step_of_them() -> None:
    floor = {
        "fit": {"1": {"fixed_us": 3.0, "rate_gbps": 3000.0}},
        "products": [
            {"model": "llama3-8b", "tp": 4, "rows": 1, "product": p, "us": us}
            for p, us in (("qkv", 8.0), ("o_proj", 5.0), ("gate_up", 20.0), ("down", 12.0))
        ],
    }
    got = db.probe_products_ms(floor, "llama3-8b", 4, 32, 1)
    head_bytes = 128256 * 4096 * 2 // 4  # the LM head's rows on one of 4 ranks (vocab % 256 == 0)
    assert got == pytest.approx((32 * 45.0 + 3.0 + head_bytes / 3000.0 / 1e3) / 1e3)
    assert db.probe_products_ms(floor, "llama3-8b", 4, 32, 16) is None  # no 16-row fit
    assert db.probe_products_ms(floor, "llama3-8b", 2, 32, 1) is None  # another slice
    assert db.probe_products_ms(None, "llama3-8b", 4, 32, 1) is None


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.mkdir(parents=True)
    (path / "profile.json").write_text(json.dumps(doc))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)  # fmt: skip


def test_the_table_over_one_to_eight_gpus_of_two_machines(tmp_path: Path) -> None:
    h100, h200 = tmp_path / "h100", tmp_path / "h200"
    for tp in (1, 2, 3, 4, 8):
        roof = 5.0 / tp
        runs = [run(b, roof * 1.5, roof, roof * 1.2, 0.3, 0.2, 330) for b in (1, 16)]
        _write(h100 / f"profile-8b-tp{tp}", profile("llama3-8b", tp, runs, {"1": roof * 1.2}))
    _write(h200 / "profile-dense-tp4", profile(
        "qwen2.5-72b", 4, [run(1, 1.4, 1.0, 1.1, 0.1, 0.1, 95)], {"1": 1.1}, layers=8,
        gpu="NVIDIA H200", copy=4247.0))  # fmt: skip
    done = _cli(str(h100), str(h200), "--md", str(tmp_path / "t.md"))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "t.md").read_text()
    assert text == done.stdout
    assert "NVIDIA H100 80GB HBM3, NVIDIA H200; roofline at each profile's copy rate" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("| llama3-8b")]
    assert [ln.split(" | ")[1] for ln in lines] == [
        "1",
        "1",
        "2",
        "2",
        "3",
        "3",
        "4",
        "4",
        "8",
        "8",
    ]
    # TP=3 and 8 have no target: their budget cells say so
    for ln in lines:
        cells = ln.split(" | ")
        assert (cells[8] == "-") == (cells[1] in ("3", "8")), ln
    tp4 = next(ln for ln in lines if ln.split(" | ")[1] == "4")
    assert "| 1.250 | 1.875 (1.50x) | 1.500 (1.20x) | - |" in tp4  # no floor.json: no probe
    dense = next(ln for ln in text.splitlines() if ln.startswith("| qwen2.5-72b"))
    assert "| 1.2 | 1.200 | 0.100 | 0.300 |" in dense


def test_bad_input_says_what_is_wrong(tmp_path: Path) -> None:
    done = _cli(str(tmp_path / "nowhere"))
    assert done.returncode == 2 and "nowhere: not a folder" in done.stderr
    done = _cli(str(tmp_path), "--gbps", "0")
    assert done.returncode == 2 and "--gbps: expected a rate > 0, got 0.0" in done.stderr
    (tmp_path / "profile-x").mkdir()
    (tmp_path / "profile-x" / "profile.json").write_text('{"decode": [')  # cut off
    done = _cli(str(tmp_path))
    assert done.returncode == 1 and "skipped" in done.stderr  # nothing measured: exit 1
