"""A TP collective inside a decode step costs more than its curve: the excess fitted on
calibration steps timed with and without their collectives, added to every TP collective
of a decode step, over every split of 1, 2, 3, 4 and 8 GPUs and on mixed machines."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpulane.inference.sharding import step_comm
from gpulane.planning.comm import Comms, MeasuredComm
from gpulane.planning.compute import Compute
from gpulane.planning.placement import place
from gpulane.planning.predict import Workload, predict, splits
from gpulane.planning.step_collectives import with_step_collectives
from tests.planning.common import H100, H200, PROJ, box, flat_curve_rows, model, no_topology

CURVE_US = 20.0


def _comms() -> Comms:
    rows = [replace(r, world_size=n) for n in (2, 3, 4, 8) for r in flat_curve_rows(CURVE_US)]
    rows += [replace(r, op="sendrecv", world_size=2) for r in flat_curve_rows(10.0)]
    return Comms(MeasuredComm(rows, "flat"), PROJ)


def _decode_row(name: str, tp: int, batch: int, extra_us: float, layers: int = 8,
                alone_ms: float = 2.0, gpu: str = "H200") -> dict[str, Any]:  # fmt: skip
    """A calibration step of ``layers`` layers at ``tp`` that took its collectives' curve
    time plus ``extra_us`` each on top of ``alone_ms`` without them."""
    shape = model(name).with_layers(layers)
    count = sum(c.count for c in step_comm(shape, tp, 1, batch, batch, 2) if c.op != "send")
    total_ms = alone_ms + count * (CURVE_US + extra_us) / 1e3
    return {"kind": "tokens", "status": "ok", "op": "decode", "model": name, "tp": tp, "pp": 1,
            "batch": batch, "input_len": 512, "output_len": 64, "layers": layers, "gpu": gpu,
            "time_us": total_ms * 1e3, "extra": {"compile": True, "compute_only_ms": alone_ms}}  # fmt: skip


def test_excess_per_collective_by_hand() -> None:
    """8 layers at TP=2: 17 all-reduces and one all-gather of the logits, 20 us each on the
    curve; the step took 5 us more a collective than the curves say."""
    shape = model("llama3-8b").with_layers(8)
    rows = [_decode_row("llama3-8b", 2, 1, 5.0), _decode_row("llama3-8b", 2, 16, 5.0)]
    c = with_step_collectives(Compute(H200), shape, rows, _comms(), no_topology(4), 2)
    assert c.decode_collective_ms == pytest.approx(0.005)
    assert "decode TP collectives +5.0 us each beyond their curves" in c.source
    assert "median of 2 steps" in c.source


def test_no_row_timed_both_ways_leaves_the_curves_alone() -> None:
    shape = model("llama3-8b").with_layers(8)
    base = Compute(H200)
    tp1 = _decode_row("llama3-8b", 1, 1, 5.0)  # no collectives to time
    no_alone = _decode_row("llama3-8b", 2, 1, 5.0)
    del no_alone["extra"]["compute_only_ms"]
    prefill = {**_decode_row("llama3-8b", 2, 1, 5.0), "op": "prefill"}
    for rows in ([], [tp1], [no_alone], [prefill]):
        assert with_step_collectives(base, shape, rows, _comms(), no_topology(4), 2) is base
    # a 1-GPU machine cannot place the TP=2 row's group: nothing to compare it with
    got = with_step_collectives(base, shape, [_decode_row("llama3-8b", 2, 1, 5.0)], _comms(),
                                no_topology(1), 2)  # fmt: skip
    assert got is base


def test_median_over_machines_and_never_below_the_curve() -> None:
    """Rows of two machines (an H100 and an H200 build, 3 and 9 us over the curve) and a
    third at 4 us: the median; a step faster than its curves adds nothing."""
    shape = model("qwen3-30b-a3b").with_layers(8)
    rows = [_decode_row("qwen3-30b-a3b", 2, 4, 3.0, gpu="H100"),
            _decode_row("qwen3-30b-a3b", 2, 32, 9.0), _decode_row("qwen3-30b-a3b", 4, 4, 4.0)]  # fmt: skip
    c = with_step_collectives(Compute(H100), shape, rows, _comms(), no_topology(4), 2)
    assert c.decode_collective_ms == pytest.approx(0.004)
    fast = [_decode_row("qwen3-30b-a3b", 2, 4, -8.0)]
    c = with_step_collectives(Compute(H200), shape, fast, _comms(), no_topology(4), 2)
    assert c.decode_collective_ms == 0.0


def test_own_rows_first_other_models_carry_over() -> None:
    shape = model("qwen3-30b-a3b").with_layers(8)
    other = [_decode_row("llama3-8b", 2, 1, 12.0)]
    own = [_decode_row("qwen3-30b-a3b", 2, 4, 2.0)]
    c = with_step_collectives(Compute(H200), shape, other + own, _comms(), no_topology(4), 2)
    assert c.decode_collective_ms == pytest.approx(0.002)
    c = with_step_collectives(Compute(H200), shape, other, _comms(), no_topology(4), 2)
    assert c.decode_collective_ms == pytest.approx(0.012)


def test_projected_paths_of_a_mixed_box() -> None:
    """No measured curves: the excess is over the projection of the row's TP=2 group's
    path (an NVLink pair of a box whose other pairs cross the CPUs)."""
    shape = model("llama3-8b").with_layers(8)
    topo = box(4, {(0, 1), (2, 3)}, 5, 16)
    comms = Comms(None, PROJ, projected_only=True)
    placement = place(topo, 2, 2, 1)
    calls = [c for c in step_comm(shape, 2, 1, 1, 1, 2) if c.op != "send"]
    curve = sum(c.count * comms.time(c.op, 2, c.size_bytes, placement.tp_label,
                                     placement.tp_gbps).time_us for c in calls)  # fmt: skip
    count = sum(c.count for c in calls)
    row = _decode_row("llama3-8b", 2, 1, 0.0)
    row["time_us"] = 2000.0 + curve + count * 6.0
    c = with_step_collectives(Compute(H200), shape, [row], comms, topo, 2)
    assert c.decode_collective_ms == pytest.approx(0.006)


@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("name", ["llama3-8b", "qwen3-30b-a3b"])
def test_every_split_decode_pays_the_excess_on_its_tp_collectives(gpus: int, name: str) -> None:
    """Every split of 1, 2, 3, 4 and 8 GPUs: a TP=1 split (no collectives) is unchanged; a
    TP split's decode step is longer by its collectives x the excess (pp=1: exactly); the
    prefill does not move (its excess was not measured)."""
    shape = model(name).with_layers(8)
    plain = Compute(H200, compiled=True)
    extra = Compute(H200, compiled=True, decode_collective_ms=0.005)
    wl = Workload(4, 512, 64)
    seen = 0
    for tp, pp, why in splits(shape, gpus):
        if why is not None:
            continue
        seen += 1
        placement = place(no_topology(gpus), gpus, tp, pp)
        a = predict(shape, tp, pp, wl, _comms(), plain, placement, H200.memory_gib)
        b = predict(shape, tp, pp, wl, _comms(), extra, placement, H200.memory_gib)
        assert a.decode and b.decode and a.prefill and b.prefill
        assert b.prefill.time_ms == a.prefill.time_ms
        if tp == 1:
            assert b.decode.time_ms == a.decode.time_ms
            continue
        assert b.decode.time_ms > a.decode.time_ms
        if pp == 1:
            count = sum(c.count for c in step_comm(shape, tp, 1, 4, 4, 2) if c.op != "send")
            assert b.decode.time_ms - a.decode.time_ms == pytest.approx(count * 0.005)
            assert b.decode.allreduce_ms - a.decode.allreduce_ms == pytest.approx(count * 0.005)
    assert seen >= 1
