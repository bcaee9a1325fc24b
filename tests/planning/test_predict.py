"""One split's prediction: the model's arithmetic by hand, the rule of thumb beside it,
and the splits the shapes or the memory refuse."""

from __future__ import annotations

import pytest

from gpulane.planning.comm import Comms, MeasuredComm
from gpulane.planning.compute import Compute
from gpulane.planning.placement import apply_what_if, place
from gpulane.planning.predict import Workload, predict, splits
from tests.planning.common import (
    H100,
    H200,
    PROJ,
    FixedCompute,
    flat_curve_rows,
    model,
    no_topology,
    small,
)


def test_decode_and_prefill_of_tp2_by_hand() -> None:
    shape = small()  # 4 layers: 2 x 4 + 1 (embedding) = 9 all-reduces, 1 logits all-gather
    comms = Comms(MeasuredComm(flat_curve_rows(10.0)), PROJ)
    wl = Workload(batch=4, input_len=16, output_len=8, chunk_tokens=32)
    placement = place(no_topology(2), 2, 2, 1)
    p = predict(shape, 2, 1, wl, comms, FixedCompute(H200), placement, 140.0)
    assert p.fits and p.decode is not None and p.prefill is not None
    # decode: 1.0 ms compute + 10 calls x 10 us
    assert p.decode.time_ms == pytest.approx(1.0 + 10 * 0.010)
    assert p.decode.tokens_per_s == pytest.approx(4 / 1.1e-3)
    assert p.decode.allreduce_share == pytest.approx(0.1 / 1.1)
    sizes = {c["op"]: (c["count"], c["size_bytes"]) for c in p.decode.calls}
    assert sizes["all_reduce"] == (9, 4 * 1024 * 2)  # hidden x batch x bytes
    assert sizes["all_gather"] == (1, 4 * 1024 * 2)  # rows x padded vocab x bytes
    # prefill: 32 tokens a chunk = 2 sequences of 16; 2 chunks one after the other
    assert p.prefill.units == 2 and p.prefill.tokens == 32
    assert p.prefill.time_ms == pytest.approx(2 * (5.0 + 0.1))
    assert p.prefill.tokens_per_s == pytest.approx(64 / 10.2e-3)
    assert p.ttft_ms == p.prefill.time_ms
    assert p.request_ms == pytest.approx(10.2 + 7 * 1.1)
    dict_ = p.to_dict()
    assert dict_["name"] == "TP=2" and dict_["request_ms"] == pytest.approx(p.request_ms)


def test_pipeline_by_hand() -> None:
    shape = small()
    comms = Comms(MeasuredComm(flat_curve_rows(10.0)), PROJ)
    placement = place(no_topology(2), 2, 1, 2)
    # batch 4 in 2 micro-batches: each stage 1 ms per micro-batch; sends: hidden and
    # residual (2 x 10 us, as 2-rank all_gathers), tokens back (10 us)
    wl = Workload(batch=4, input_len=16, output_len=8, chunk_tokens=1 << 20)
    p = predict(shape, 1, 2, wl, comms, FixedCompute(H200), placement, 140.0)
    assert p.decode is not None and p.prefill is not None
    assert p.micro_batches == 2 and p.decode.tokens == 2
    assert p.decode.send_ms == pytest.approx(0.030)
    # step = max(2 x 1.0, 1.0 + 1.0 + 0.03)
    assert p.decode.time_ms == pytest.approx(2.03)
    assert p.decode.allreduce_share == 0.0
    assert p.decode.bubble_share == pytest.approx(1 - 2.0 / 2.03)
    # prefill: at least 2 chunks (one per micro-batch); (2 - 1) x 5 + 5 + 5 + 0.02
    assert p.prefill.units == 2
    assert p.prefill.time_ms == pytest.approx(15.02)
    # batch 1: one micro-batch, the stages take turns
    p1 = predict(shape, 1, 2, Workload(1, 16, 8), comms, FixedCompute(H200), placement, 140)
    assert p1.decode is not None and p1.decode.time_ms == pytest.approx(2.03)
    assert p1.decode.bubble_share == pytest.approx(1 - 1.0 / 2.03)


def test_rule_of_thumb_beside_the_prediction() -> None:
    shape = small()
    comms = Comms(None, PROJ)
    topo, _ = apply_what_if(no_topology(2), "pcie:3x4")
    placement = place(topo, 2, 2, 1)
    assert placement.tp_label == "PHB" and placement.tp_gbps == pytest.approx(3.94)
    wl = Workload(batch=64, input_len=16, output_len=8)
    p = predict(shape, 2, 1, wl, comms, FixedCompute(H200, dec=0.1), placement, 140)
    assert p.rule_decode is not None and p.decode is not None
    # 9 all-reduces of 64 x 1024 x 2 B, x 2(n-1)/n on the wire, + the logits all-gather
    wire = 9 * 131072 * 1.0 + 1 * 131072 * 0.5
    assert p.rule_decode.needed_gbps == pytest.approx(wire / 0.1e-3 / 1e9)
    assert p.rule_decode.fraction == pytest.approx(p.rule_decode.needed_gbps / 3.94)
    assert p.rule_decode.trouble is True and "expect trouble" in p.rule_decode.text()
    # the projected time itself: latency + size x factor / (0.8 x 3.94 GB/s)
    ar = next(c for c in p.decode.calls if c["op"] == "all_reduce")
    assert ar["time_us"] == pytest.approx(10.0 + 131072 * 1.0 / (0.8 * 3.94e3))
    assert ar["source"].startswith("projected PHB")


def test_splits_refused_by_the_shapes_and_memory() -> None:
    shape = model("llama3-70b")
    got = {(tp, pp): why for tp, pp, why in splits(shape, 3)}
    assert got[(1, 3)] is None and "not divisible by tp=3" in str(got[(3, 1)])
    comms = Comms(None, PROJ)
    p = predict(shape, 1, 1, Workload(1, 2048, 256), comms, Compute(H100),
                place(no_topology(1), 1, 1, 1), H100.memory_gib)  # fmt: skip
    assert not p.fits and p.decode is None and "per GPU" in str(p.refused)
