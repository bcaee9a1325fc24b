"""floor_probe.py's logic on a CPU: the products it times are a decode layer's (checked
against the parameter count the planner uses, 1 to 8 GPUs), the fit recovers a line, and a
dry run on the tiny model writes every probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.inference import floor_probe as fp
from gpulane.inference.shapes import packaged_shape
from gpulane.inference.sharding import layer_params, rank_slices

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("model", ["llama3-8b", "qwen2.5-72b", "llama3-70b"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_the_products_are_a_layers_weights(model: str, tp: int) -> None:
    shape = packaged_shape(model)
    assert shape is not None
    products = fp.layer_products(model, tp)
    assert [p[0] for p in products] == ["qkv", "o_proj", "gate_up", "down"]
    # every weight of the layer but its two norms (and the QKV bias, which is no product)
    bias = rank_slices(shape, tp).qkv_out if shape.qkv_bias else 0
    norms = 2 * shape.hidden_size
    assert (
        sum(n * k for _, n, k in products)
        == layer_params(shape, rank_slices(shape, tp), 0) - norms - bias
    )


@given(
    fixed=st.floats(0.5, 20.0),
    rate=st.floats(100.0, 10000.0),
    sizes=st.lists(st.integers(1 << 20, 1 << 30), min_size=2, max_size=12, unique=True),
)
def test_the_fit_recovers_fixed_cost_and_rate(fixed: float, rate: float, sizes: list[int]) -> None:
    rows = [{"rows": 1, "weight_bytes": b, "us": fixed + b / rate / 1e3} for b in sizes]
    got = fp.fit_products(rows)["1"]
    assert got["fixed_us"] == pytest.approx(fixed, abs=0.01)
    assert got["rate_gbps"] == pytest.approx(rate, rel=1e-3, abs=0.1)
    assert got["shapes"] == len(sizes)


def test_a_line_needs_two_distinct_sizes() -> None:
    with pytest.raises(ValueError, match="two or more distinct x"):
        fp.fit_line([(1.0, 2.0), (1.0, 3.0)])
    for few in ([], [(1.0, 2.0)]):  # no division by zero on nothing measured
        with pytest.raises(ValueError, match="two or more distinct x"):
            fp.fit_line(few)


def test_dry_run_writes_every_probe(tmp_path: Path) -> None:
    (tmp_path / "copy_bw.json").write_text(json.dumps({"copy_gbps_read_plus_write_median": 50.0}))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "inference" / "floor_probe.py"),
           "--out", str(tmp_path), "--device", "cpu", "--models", "tiny", "--tps", "1,2,1",
           "--replays", "1"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads((tmp_path / "floor.json").read_text())
    assert doc["copy_gbps"] == 50.0 and doc["chain_us"] > 0
    assert set(doc["norm_us"]) == {"4096", "8192"}
    products = doc["products"]
    assert len(products) == 3 * 4 * 2  # TP=1, 2 and 1 again, four products, 1 row and 16
    for p in products:
        assert p["roofline_us"] == pytest.approx(p["weight_bytes"] / 50.0 / 1e3, abs=0.01)
        assert p["above_us"] == pytest.approx(p["us"] - p["roofline_us"], abs=0.02)
    # a shape met before (at TP=2 the tiny model's QKV is TP=1's o_proj; all of TP=1's the
    # second time) is timed again but left out of the fit
    seen: set[tuple[int, int, int]] = set()
    want = []
    for p in products:
        want.append((p["rows"], p["n"], p["k"]) in seen)
        seen.add((p["rows"], p["n"], p["k"]))
    assert [p["repeat"] for p in products] == want and want[16:] == [True] * 8
    assert doc["fit"]["1"]["shapes"] == len({(p["n"], p["k"]) for p in products}) < 12
    assert "products of 16 row(s)" in done.stdout


def test_no_gpu_says_how_to_dry_run(tmp_path: Path) -> None:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "inference" / "floor_probe.py"),
           "--out", str(tmp_path)]  # fmt: skip
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU, on any host
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert done.returncode == 2
    assert "no GPU visible; use --device cpu for a dry run" in done.stderr
    assert not (tmp_path / "floor.json").exists()
