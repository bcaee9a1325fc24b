"""Compute of a stage: the roofline at a GPU's rates, the GPU lookup, and the calibration
on measured token runs."""

from __future__ import annotations

from typing import Any

import pytest

from gpulane.errors import InputError
from gpulane.planning.compute import Compute, calibrate, gpu_spec
from tests.planning.common import H200, model


def test_roofline_decode_of_70b_by_hand() -> None:
    shape = model("llama3-70b")
    # per layer per TP=2 rank: 2 norms + QKV (32 + 2 x 4 heads of 128) + o_proj (4096 in)
    # + gate/up/down (28672 / 2 = 14336 wide each)
    h = 8192
    layer = 2 * h + h * 5120 + 4096 * h + 3 * h * 14336
    weights = (80 * layer + h + 64128 * h) * 2  # the final norm and the LM head half; no
    embedding = 1 * h * 2  # embedding table: one row of it is gathered
    kv = 80 * 2 * 512 * 1 * 2304 * 2  # layers x K,V x kv_size x batch x cache_len x bytes
    kv_write = 80 * 2 * 512 * 1 * 2  # one new position
    # per token per layer: 6 hidden-wide tensors, QKV out, attention out, 3 MLP-wide,
    # each written and read; the logits half of 128256 padded to 128 (64128), same
    act = 80 * (6 * h + 5120 + 4096 + 3 * 14336) * 2 * 2 + 2 * 64128 * 2
    want_ms = (weights + embedding + kv + kv_write + act) / 4000e9 * 1e3
    got = Compute(H200).decode_ms(shape, 2, 1, 0, 1, 2304, 2)
    assert got == pytest.approx(want_ms, rel=1e-12)
    # 0.26 ms less than when the whole 1.05 GB embedding half was counted (17.73 ms)
    assert got == pytest.approx(17.47, abs=0.01)
    # prefill is compute-bound: 2 x weights x tokens / 700 TFLOP/s, plus attention
    pre = Compute(H200).prefill_ms(shape, 2, 1, 0, 1, 2048, 2)
    assert pre == pytest.approx(2 * 34.2e9 * 2048 / 700e12 * 1e3, rel=0.05)
    scaled = Compute(H200, decode_scale=1.5).decode_ms(shape, 2, 1, 0, 1, 2304, 2)
    assert scaled == pytest.approx(1.5 * got)
    # a fixed time per layer: a stage of half the layers pays half of it
    fixed = Compute(H200, decode_layer_ms=0.01)
    assert fixed.decode_ms(shape, 2, 1, 0, 1, 2304, 2) == pytest.approx(got + 0.8)
    assert fixed.decode_ms(shape, 2, 2, 1, 1, 2304, 2) - Compute(H200).decode_ms(
        shape, 2, 2, 1, 1, 2304, 2
    ) == pytest.approx(0.4)


def test_gpu_spec_lookup_and_overrides() -> None:
    specs = {"H100": {"hbm_gbps": 2850, "tflops": 690, "memory_gib": 79.6},
             "H100 PCIe": {"hbm_gbps": 1700, "tflops": 530, "memory_gib": 79.6}}  # fmt: skip
    assert gpu_spec(specs, "NVIDIA H100 80GB HBM3").name == "H100"
    assert gpu_spec(specs, "NVIDIA H100 PCIe").hbm_gbps == 1700
    s = gpu_spec(specs, "NVIDIA H100 80GB HBM3", hbm_gbps=3000.0)
    assert s.hbm_gbps == 3000 and "hbm_gbps given" in s.source
    with pytest.raises(InputError, match="gpu=NAME"):
        gpu_spec(specs, "Mystery GPU")
    assert gpu_spec(specs, None, 1.0, 2.0, 3.0).tflops == 2.0


def test_calibration_on_a_tokens_run() -> None:
    shape = model("llama3-8b")
    roof = Compute(H200).decode_ms(shape, 2, 1, 0, 8, 640, 2)
    rows = [
        {"kind": "tokens", "op": "decode", "model": "llama3-8b", "tp": 2, "pp": 1,
         "batch": 8, "input_len": 512, "output_len": 128, "layers": 32, "run_id": "t",
         "time_us": 4000.0, "extra": {"compute_only_ms": 1.25 * roof}},
        {"kind": "tokens", "op": "decode", "model": "other", "tp": 2, "pp": 1, "batch": 8,
         "input_len": 512, "output_len": 128, "extra": {"compute_only_ms": 99.0}},
    ]  # fmt: skip
    c = calibrate(Compute(H200), shape, rows, 8, 512, 2)
    assert c.decode_scale == pytest.approx(1.25) and c.prefill_scale == 1.0
    assert "calibrated" in c.source and "tp=2 batch 8" in c.source
    assert calibrate(Compute(H200), shape, rows[1:], 8, 512, 2).source == "roofline"


def test_calibration_across_tp_degrees_finds_the_part_that_does_not_split() -> None:
    shape = model("llama3-8b")
    base = Compute(H200)
    a, b_ms = 1.15, 0.040  # 15 % above the roofline, plus 40 us per layer
    rows: list[dict[str, Any]] = []
    for tp in (1, 2):
        roof = base.decode_ms(shape, tp, 1, 0, 1, 1088, 2)
        rows.append(
            {"kind": "tokens", "op": "decode", "model": "llama3-8b", "tp": tp, "pp": 1,
             "batch": 1, "input_len": 1024, "output_len": 64, "layers": 32, "run_id": f"t{tp}",
             "time_us": 1e3 * (a * roof + 32 * b_ms),
             "extra": {"compute_only_ms": None if tp == 1 else a * roof + 32 * b_ms}}
        )  # fmt: skip
    c = calibrate(base, shape, rows, 1, 1024, 2)
    assert c.decode_scale == pytest.approx(a) and c.decode_layer_ms == pytest.approx(b_ms)
    assert "40.0 us/layer (fitted over tp=1,2" in c.source
    # a stage of half the layers pays half the fixed time (PP=2)
    full = c.decode_ms(shape, 1, 1, 0, 1, 1088, 2)
    half = c.decode_ms(shape, 1, 2, 0, 1, 1088, 2)
    assert full - half == pytest.approx(
        a
        * (base.decode_ms(shape, 1, 1, 0, 1, 1088, 2) - base.decode_ms(shape, 1, 2, 0, 1, 1088, 2))
        + 16 * b_ms
    )
    # one TP degree only: the plain factor, no fixed term
    one = calibrate(base, shape, rows[1:], 1, 1024, 2)
    assert one.decode_layer_ms == 0.0 and one.decode_scale > a
    # a fit that needs a negative fixed time is refused: the plain factor again
    rows[0]["time_us"] *= 0.5
    assert calibrate(base, shape, rows, 1, 1024, 2).decode_layer_ms == 0.0
