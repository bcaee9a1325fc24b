"""Compute of a stage: the roofline at a GPU's rates, the GPU lookup, and the calibration
on measured token runs."""

from __future__ import annotations

from typing import Any

import pytest

from gpulane.errors import InputError
from gpulane.planning.compute import Compute, calibrate, gpu_spec
from gpulane.planning.fixed import stage_units
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
    # a fixed time per kernel (20 in an eager dense layer, 10 us a layer here): a stage of
    # half the layers pays half of it
    # (plus the elementwise traffic in kernels' worth: 0.3 % more here)
    fixed = Compute(H200, decode_unit_ms=0.01 / 20)
    assert fixed.decode_ms(shape, 2, 1, 0, 1, 2304, 2) == pytest.approx(got + 0.8, rel=5e-3)
    assert fixed.decode_ms(shape, 2, 2, 1, 1, 2304, 2) - Compute(H200).decode_ms(
        shape, 2, 2, 1, 1, 2304, 2
    ) == pytest.approx(0.4, rel=5e-3)


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
    a, b_ms = 1.15, 0.040  # 15 % above the roofline, plus 40 us per layer (2 us a kernel)
    rows: list[dict[str, Any]] = []
    for tp in (1, 2):
        roof = base.decode_ms(shape, tp, 1, 0, 1, 1088, 2)
        # the fixed units: 20 kernels a layer and the traffic in kernels' worth (0.2 %)
        units = stage_units(shape, tp, 1, 0, "decode", 1, False)
        assert units == pytest.approx(32 * 20, rel=0.005)
        ms = a * roof + units * b_ms / 20
        rows.append(
            {"kind": "tokens", "op": "decode", "model": "llama3-8b", "tp": tp, "pp": 1,
             "batch": 1, "input_len": 1024, "output_len": 64, "layers": 32, "run_id": f"t{tp}",
             "time_us": 1e3 * ms, "extra": {"compute_only_ms": None if tp == 1 else ms}}
        )  # fmt: skip
    c = calibrate(base, shape, rows, 1, 1024, 2)
    assert c.decode_scale == pytest.approx(a) and c.decode_unit_ms == pytest.approx(b_ms / 20)
    assert "2.00 us/kernel (40.0 us per eager dense layer) (fitted over tp=1,2" in c.source
    # a stage of half the layers pays half the fixed time (PP=2)
    full = c.decode_ms(shape, 1, 1, 0, 1, 1088, 2)
    half = c.decode_ms(shape, 1, 2, 0, 1, 1088, 2)
    assert full - half == pytest.approx(
        a
        * (base.decode_ms(shape, 1, 1, 0, 1, 1088, 2) - base.decode_ms(shape, 1, 2, 0, 1, 1088, 2))
        + 16 * b_ms,
        rel=0.005,
    )
    # one TP degree only: the plain factor, no fixed term
    one = calibrate(base, shape, rows[1:], 1, 1024, 2)
    assert one.decode_unit_ms == 0.0 and one.decode_scale > a
    # a fit that needs a negative fixed time is refused: the plain factor again
    rows[0]["time_us"] *= 0.5
    assert calibrate(base, shape, rows, 1, 1024, 2).decode_unit_ms == 0.0


def _rows_of(calib: str, compute: Compute, compiled: bool = False) -> list[dict[str, Any]]:
    """TP=1 and TP=2 tokens rows of ``calib`` timed exactly as ``compute`` says."""
    shape = model(calib)
    rows: list[dict[str, Any]] = []
    for tp in (1, 2):
        ms = compute.decode_ms(shape, tp, 1, 0, 1, 1088, 2)
        pre = compute.prefill_ms(shape, tp, 1, 0, 1, 1024, 2)
        for op, t in (("decode", ms), ("prefill", pre)):
            rows.append(
                {"kind": "tokens", "op": op, "model": calib, "tp": tp, "pp": 1, "batch": 1,
                 "input_len": 1024, "output_len": 64, "layers": shape.num_layers,
                 "run_id": f"{calib}-{tp}", "time_us": 1e3 * t, "ttft_ms": t,
                 "extra": {"compute_only_ms": t if tp == 2 else None, "compile": compiled,
                           "prefill_chunks": 1}}
            )  # fmt: skip
    return rows


def test_fit_on_one_model_carries_over_to_wider_and_mixture_of_experts_layers() -> None:
    # a GPU that runs 8B's decode at 0.95 x roofline + 2.5 us per kernel, prefill at
    # 1.2 x FLOPs + 0.3 ms per GB of elementwise traffic
    truth = Compute(H200, decode_scale=0.95, prefill_scale=1.2, decode_unit_ms=0.0025,
                    prefill_unit_ms=0.3)  # fmt: skip
    rows = _rows_of("llama3-8b", truth)
    for target in ("llama3-70b", "mixtral-8x7b"):
        shape = model(target)
        c = calibrate(Compute(H200), shape, rows, 1, 1024, 2)
        assert c.decode_scale == pytest.approx(0.95) and c.decode_unit_ms == pytest.approx(0.0025)
        assert c.prefill_scale == pytest.approx(1.2) and c.prefill_unit_ms == pytest.approx(0.3)
        assert "on llama3-8b" in c.source
        for tp, pp, stage in ((2, 1, 0), (1, 2, 1)):
            want = truth.decode_ms(shape, tp, pp, stage, 1, 1088, 2)
            assert c.decode_ms(shape, tp, pp, stage, 1, 1088, 2) == pytest.approx(want)
    # the fixed part per layer: the same kernels in 70B's wider layers, twice as many in
    # a mixture-of-experts layer; in a prefill, traffic that grows with the width
    base = Compute(H200)
    c = calibrate(base, model("llama3-70b"), rows, 1, 1024, 2)

    def fixed(name: str, op: str) -> float:
        shape = model(name).with_layers(1)
        if op == "decode":
            return c.decode_ms(shape, 2, 1, 0, 1, 1088, 2) - 0.95 * base.decode_ms(
                shape, 2, 1, 0, 1, 1088, 2
            )
        return c.prefill_ms(shape, 2, 1, 0, 1, 1024, 2) - 1.2 * base.prefill_ms(
            shape, 2, 1, 0, 1, 1024, 2
        )

    assert fixed("llama3-70b", "decode") == pytest.approx(fixed("llama3-8b", "decode"), rel=0.01)
    assert fixed("llama3-70b", "decode") > fixed("llama3-8b", "decode")  # wider: more traffic
    assert fixed("mixtral-8x7b", "decode") == pytest.approx(
        43 / 20 * fixed("llama3-8b", "decode"), rel=0.01
    )
    assert fixed("llama3-70b", "prefill") > 1.7 * fixed("llama3-8b", "prefill")
    assert fixed("mixtral-8x7b", "prefill") > fixed("llama3-8b", "prefill")


def test_rows_of_the_model_itself_come_first_and_compiled_rows_count_compiled_kernels() -> None:
    truth8 = Compute(H200, decode_scale=0.95, decode_unit_ms=0.0025)
    truth70 = Compute(H200, decode_scale=1.05, decode_unit_ms=0.004, compiled=True)
    rows = _rows_of("llama3-8b", truth8) + _rows_of("llama3-70b", truth70, compiled=True)
    c = calibrate(Compute(H200), model("llama3-70b"), rows, 1, 1024, 2)
    assert c.compiled and c.decode_scale == pytest.approx(1.05)
    assert c.decode_unit_ms == pytest.approx(0.004) and "compiled tokens runs" in c.source
    assert "on llama3" not in c.source  # its own rows: no model named
