"""Advice with its uncertainty (issue 44.11) and the P2P and concurrency inputs (issue 46):
every figure carries its basis and the error its validation table found, with no more
digits than that error allows; p2p=off and concurrency=N change the prediction."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from gpulane.planning.compute import Compute, GpuSpec
from gpulane.planning.uncertainty import (
    ExpectedError,
    compute_basis,
    digits_for,
    expected_errors,
    rounded,
)

CONF = Path(__file__).resolve().parents[2] / "gpulane/conf/advise.yaml"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks/advise"
GPU = GpuSpec("H200", 4000, 700, 140)


def advise(*args: str) -> dict:
    cmd = [sys.executable, "-m", "gpulane", "advise", *args, "format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def errors() -> dict[str, ExpectedError]:
    return expected_errors(yaml.safe_load(CONF.read_text())["expected_error"])


def _err_range(table: str) -> tuple[int, int, int]:
    """(lowest, highest error in %, figures) of a validation table's err columns."""
    import re

    path = BENCH / table
    if not path.exists():  # a run folder kept packed as <folder>.zip (benchmarks/archive.py)
        folder, _, member = table.partition("/")
        with zipfile.ZipFile(BENCH / f"{folder}.zip") as zf:
            text = zf.read(member).decode()
    else:
        text = path.read_text()
    errs = [int(x) for x in re.findall(r"\| ([+-]\d+)%", text)]
    return min(errs), max(errs), len(errs)


def test_conf_errors_are_the_validation_tables() -> None:
    """The yaml's ranges are those of the tables it cites (recomputed from the tables)."""
    e = errors()
    low, high, n = _err_range("h200x2-vs-measured-roofline-step-bytes.md")
    assert (round(100 * e["roofline"].low), round(100 * e["roofline"].high)) == (low, high)
    assert e["roofline"].of == n == 24 and e["roofline"].within_15 == 4
    low, high, _ = _err_range("h200x2-vs-measured-calibrated-tp1-only-step-bytes.md")
    one = e["calibrated_one_factor"]
    assert (round(100 * one.low), round(100 * one.high)) == (low, high)
    a = _err_range("h200x2-vs-measured-calibrated-step-bytes.md")
    b = _err_range("h200x4-round4/heldout4.md")
    cal = e["calibrated"]
    assert round(100 * cal.low) == min(a[0], b[0]) and round(100 * cal.high) == max(a[1], b[1])
    assert cal.of == a[2] + b[2]


def test_fewer_digits_where_the_error_is_large() -> None:
    e = errors()
    assert rounded(2522.5, e["roofline"]) == "~2500"  # the example
    assert rounded(2522.5, e["calibrated"]) == "~2520"
    assert rounded(2522.5, None) == "2522"  # nothing known: as before
    assert rounded(30.74, e["roofline"]) == "31"
    assert rounded(0.001234, e["roofline"]) == "0.0012"
    assert digits_for(e["roofline"]) == 2 and digits_for(e["calibrated"]) == 3
    # a rate of a prediction 107 % too fast was measured 52 % below it
    assert e["roofline"].text("tok/s") == "expect -52 %..-2 %"
    assert e["roofline"].text("ms") == "expect +2 %..+107 %"


def test_basis_follows_the_compute_model() -> None:
    assert compute_basis(Compute(GPU)) == "roofline"
    one = Compute(GPU, decode_scale=0.9, source="roofline calibrated on tokens runs: x0.9")
    assert compute_basis(one) == "calibrated_one_factor"
    two = Compute(GPU, decode_unit_ms=0.004, source="roofline calibrated on tokens runs: ...")
    assert compute_basis(two) == "calibrated"


def test_bad_expected_error_block_is_refused() -> None:
    from gpulane.errors import InputError

    with pytest.raises(InputError, match=r"expected_error\.guess: not a basis"):
        expected_errors({"guess": {"low": 0, "high": 1, "within_15": 1, "of": 1}})
    with pytest.raises(InputError, match=r"expected_error\.roofline: expected"):
        expected_errors({"roofline": {"low": 0}})


COMMON = ("model=llama3-8b", "gpus=2", "gpu=L4", "what_if=pcie:4x16", "input_len=512",
          "output_len=64")  # fmt: skip


def test_every_prediction_carries_its_basis() -> None:
    d = advise(*COMMON, "batch=1")
    assert d["predictions"]
    for p in d["predictions"]:
        b = p["basis"]
        assert b["compute"] == "roofline" and b["collectives"] == "projected"
        assert b["expected_error"]["within_15"] == 4 and b["expected_error"]["of"] == 24
        assert "roofline only" in b["text"] and "expect -52 %..-2 % on tok/s" in b["text"]


def test_table_prints_rounded_figures_with_basis() -> None:
    cmd = [sys.executable, "-m", "gpulane", "advise", *COMMON, "batch=32"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "roofline only, colls projected; tok/s -52..-2 %, ms +2..+107 %" in out.stdout
    assert "expect: where measured figures fell" in out.stdout
    # the recommendation's figure is rounded and says its basis
    line = next(x for x in out.stdout.splitlines() if "for throughput at batch 32" in x)
    assert "decode tok/s" in line and "roofline only" in line and "on tok/s" in line


def test_p2p_off_stages_collectives_through_host_memory() -> None:
    on = advise(*COMMON, "batch=1", "p2p=on")
    off = advise(*COMMON, "batch=1", "p2p=off")
    assert on["p2p"] is True and off["p2p"] is False
    assert "P2P off" in off["build"] and "P2P off" not in on["build"]
    tp_on = next(p for p in on["predictions"] if p["tp"] == 2)
    tp_off = next(p for p in off["predictions"] if p["tp"] == 2)
    # the 14 us a staged copy adds, on each all-reduce of the step
    assert tp_off["decode"]["allreduce_ms"] > tp_on["decode"]["allreduce_ms"]
    sources = {c["source"] for c in tp_off["decode"]["calls"]}
    assert all("staged through host memory (P2P off, +14 us)" in s for s in sources)
    n = sum(c["count"] for c in tp_off["decode"]["calls"] if c["op"] == "all_reduce")
    extra = tp_off["decode"]["allreduce_ms"] - tp_on["decode"]["allreduce_ms"]
    assert extra == pytest.approx(n * 14e-3, rel=0.2)


def test_concurrency_is_the_decode_batch() -> None:
    d = advise(*COMMON, "concurrency=1,64")
    assert d["concurrency"] is True
    assert sorted({p["batch"] for p in d["predictions"]}) == [1, 64]
    by = {(p["tp"], p["batch"]): p["decode"]["tokens_per_s"] for p in d["predictions"]}
    assert by[(2, 64)] > by[(2, 1)]  # 64 sequences a step: more tok/s than one


def test_largest_batch_is_the_edge_of_what_fits() -> None:
    """concurrency 'fill' of the published cases: the most sequences the split holds,
    by the memory model predict refuses splits with."""
    from gpulane.inference.memory import GiB, estimate
    from gpulane.inference.shapes import packaged_shape
    from gpulane.planning.predict import Workload, largest_batch

    shape = packaged_shape("llama3-70b")
    wl = Workload(1, 1000, 1000, 1)
    budget = 94.5 * GiB * wl.memory_fraction
    one, two = largest_batch(shape, 1, 1, wl, 94.5), largest_batch(shape, 1, 2, wl, 94.5)
    assert 0 < one < two  # a second GPU's memory holds more than twice the sequences
    for tp, pp, n in ((1, 1, one), (1, 2, two)):
        assert estimate(shape, tp, pp, n, 1000, 1000, 1).total <= budget
        assert estimate(shape, tp, pp, n + 1, 1000, 1000, 1).total > budget
    assert largest_batch(shape, 1, 1, Workload(1, 1000, 1000, 2), 22.0) == 0  # bf16 on an L4
