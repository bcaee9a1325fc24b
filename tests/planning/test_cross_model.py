"""advise calibrated on another model's token rows (issue 44.11): a figure carries the band
of a validation of that very pair (calibration model and device, model predicted, GPUs)
where benchmarks/advise has one; else "cross-model: no validation, expect a wide error",
no number, and two digits. The same-model band is never lent to another model."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from gpulane.analysis.store import load_frame
from gpulane.planning.advice import Advice, advise
from gpulane.planning.comm import Comms
from gpulane.planning.predict import Workload
from gpulane.planning.report import figure
from gpulane.planning.uncertainty import NO_CROSS_VALIDATION, ExpectedError, expected_errors
from gpulane.record import Row, frame_rows
from tests.conftest import fixture_path
from tests.planning.common import H200, PROJ, all_pairs, box, model

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "gpulane/conf/advise.yaml"
HELDOUT = ROOT / "benchmarks/advise/h200x2-heldout"
PAIRS = {"llama3-70b": "cross_model_llama3_8b_to_70b",
         "mixtral-8x7b": "cross_model_llama3_8b_to_mixtral"}  # fmt: skip


def errors() -> dict[str, ExpectedError]:
    return expected_errors(yaml.safe_load(CONF.read_text())["expected_error"])


def heldout_table() -> str:
    """The held-out table: calibrated on llama3-8b, predicting two other models."""
    if (HELDOUT / "heldout.md").exists():
        return (HELDOUT / "heldout.md").read_text()
    with zipfile.ZipFile(HELDOUT.with_suffix(".zip")) as zf:  # kept packed
        return zf.read("heldout.md").decode()


def token_rows(name: str) -> list[Row]:
    return frame_rows(load_frame([fixture_path(f"advise/calibration/{name}")]))


def advice(rows: str, predicted: str, gpus: int) -> Advice:
    """``predicted`` on ``gpus`` NVLinked H200s, collectives projected, calibrated on
    the token rows of fixture ``rows``."""
    comms = Comms(None, PROJ, projected_only=True)
    topo = box(gpus, all_pairs(gpus), 5, 16)
    wl = [Workload(1, 512, 16)]
    got = advise(model(predicted), gpus, topo, comms, H200, wl, "box", token_rows(rows), errors())
    assert got.predictions
    return got


def test_cross_model_bands_are_the_heldout_table() -> None:
    """Each pair's band is recomputed from the held-out table's rows of that model."""
    text = heldout_table()
    assert text.startswith("# calibrated on llama3-8b only")
    for predicted, key in PAIRS.items():
        rows = [line for line in text.splitlines() if f"| {predicted} (" in line]
        errs = [int(x) for line in rows for x in re.findall(r"\| ([+-]\d+)%", line)]
        assert len(errs) == 2 * len(rows) == 16  # prefill and decode of 8 cases
        e = errors()[key]
        assert (round(100 * e.low), round(100 * e.high)) == (min(errs), max(errs))
        assert (e.within_15, e.of) == (sum(abs(x) <= 15 for x in errs), len(errs))
        assert (e.calibrated_on, e.predicts, e.device, e.gpus) == (
            "llama3-8b", predicted, "NVIDIA H200", 2)  # fmt: skip


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_tiny_cpu_rows_for_70b_give_no_band(gpus: int) -> None:
    """The issue's case: tiny's CPU token rows (of 1, 2 and 4 ranks) calibrating
    llama3-70b. No validation covers it on any GPU count: words, no number, two digits."""
    got = advice("tiny-cpu", "llama3-70b", gpus)
    assert all("fitted over tp=1,2,4" in c for c in got.computes)  # every row count used
    for p in got.predictions:
        b = p.basis
        assert b is not None and b.compute == "calibrated" and b.unvalidated
        assert b.error is None and b.to_dict()["expected_error"] is None
        assert f"on tiny, cpu; {NO_CROSS_VALIDATION}" in b.text()
        assert NO_CROSS_VALIDATION in b.cell() and "expect -" not in b.cell()
        assert figure(p, 2522.5) == "~2500"  # not the 4 digits of an unknown error


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_8b_h200_rows_for_70b_carry_the_heldout_band_on_2_gpus(gpus: int) -> None:
    """The held-out round's own calibration rows: on 2 GPUs its band; on other counts
    the table says nothing, and neither does advise."""
    want = errors()[PAIRS["llama3-70b"]]
    for p in advice("llama3-8b-h200", "llama3-70b", gpus).predictions:
        b = p.basis
        assert b is not None and b.cross_model is not None
        assert b.cross_model.startswith("on llama3-8b, NVIDIA H200")
        if gpus == 2:
            assert b.error == want and not b.unvalidated
            assert "validated llama3-8b -> llama3-70b on 2 GPUs" in b.text()
            assert "expect -18 %..+9 % on tok/s" in b.text()
            assert figure(p, 2522.5) == "~2520"
        else:
            assert b.unvalidated and NO_CROSS_VALIDATION in b.text()


def test_mixtral_from_8b_has_its_own_wider_band() -> None:
    for p in advice("llama3-8b-h200", "mixtral-8x7b", 2).predictions:
        assert p.basis is not None and p.basis.error == errors()[PAIRS["mixtral-8x7b"]]
        assert "expect -48 %..-2 % on tok/s" in p.basis.text()


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_own_rows_keep_the_same_model_band(gpus: int) -> None:
    for p in advice("llama3-8b-h200", "llama3-8b", gpus).predictions:
        assert p.basis is not None and p.basis.cross_model is None
        assert p.basis.error == errors()["calibrated"]


def test_the_command_says_it_on_tiny_rows() -> None:
    """`gpulane advise model=llama3-70b run=...` over tiny's CPU rows and H200 collectives:
    the table's basis column and the recommendations say there is no validation, and no
    same-model band is printed."""
    runs = (
        f"{fixture_path('advise/calibration/tiny-cpu')},{fixture_path('advise/nvlink-rows.jsonl')}"
    )
    cmd = [sys.executable, "-m", "gpulane", "advise", "model=llama3-70b", "gpus=2", "batch=1",
           f"run={runs}", "build=nvlink", "topology=none", "gpu=H200"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.split())
    assert "rows of tiny" in flat
    assert "no validation, expect a wide error" in flat
    assert "tok/s -12..+10 %" not in flat and "expect -12 %..+10 %" not in flat
    line = next(x for x in out.stdout.splitlines() if "for throughput at batch 1" in x)
    assert "cross-model: no validation" in line


def test_a_cross_model_entry_names_its_pair() -> None:
    from gpulane.errors import InputError

    band = {"low": 0, "high": 1, "within_15": 1, "of": 1, "calibrated_on": "a", "predicts": "b"}
    with pytest.raises(InputError, match=r"expected_error\.cross_model_x: expected .*gpus"):
        expected_errors({"cross_model_x": band})  # no device, no gpus
    got = expected_errors({"cross_model_x": {**band, "device": "cpu", "gpus": 4}})
    assert got["cross_model_x"].gpus == 4 and got["cross_model_x"].device == "cpu"
