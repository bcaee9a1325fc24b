"""The pipeline prefill at small batches: a stage's eager chunk is no faster than the host
can launch it (a floor calibrated on runs that timed an eager prefill beside the graph
replay), over every split of 1, 2, 3, 4 and 8 GPUs, dense and mixture of experts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpulane.planning.comm import Comms, MeasuredComm
from gpulane.planning.compute import Compute, calibrate
from gpulane.planning.fixed import DECODE_KERNELS, stage_launches
from gpulane.planning.placement import place
from gpulane.planning.predict import Workload, pipeline_ms, predict, splits
from tests.planning.common import H200, PROJ, flat_curve_rows, model, no_topology


def _row(tp: int, batch: int, graph_ms: float, eager_ms: float | None, layers: int = 8,
         name: str = "llama3-8b", chunks: int = 1) -> dict[str, Any]:  # fmt: skip
    extra: dict[str, Any] = {"compile": True, "prefill_chunks": chunks,
                             "compute_only_ms": graph_ms}  # fmt: skip
    if eager_ms is not None:
        extra["eager_ms"] = eager_ms
    return {"kind": "tokens", "status": "ok", "op": "prefill", "model": name, "tp": tp,
            "pp": 1, "batch": batch, "input_len": 512, "output_len": 16, "layers": layers,
            "time_us": graph_ms * 1e3, "extra": extra}  # fmt: skip


def test_host_floor_fitted_only_from_host_bound_eager_runs() -> None:
    shape = model("llama3-8b")
    kernels = 8 * DECODE_KERNELS[(False, True)]
    assert stage_launches(shape.with_layers(8), 1, 1, 0, True) == (kernels, 0)
    assert stage_launches(shape.with_layers(8), 2, 1, 0, True) == (kernels, 16)
    # batch 1: eager 3 ms against a 1 ms replay (host-bound); batch 16 GPU-bound
    rows = [_row(1, 1, 1.0, 3.0), _row(1, 16, 12.0, 12.5),
            _row(2, 1, 0.8, 3.0 + 16 * 0.05), _row(2, 16, 7.0, 7.2)]  # fmt: skip
    c = calibrate(Compute(H200), shape.with_layers(8), rows, 1, 512, 2)
    # the typical host-bound pass: the median of the two passes' time per launch
    typical = (3.0 / kernels + (3.0 + 16 * 0.05) / (kernels + 16)) / 2
    assert c.host_kernel_ms == pytest.approx(typical)
    assert c.host_collective_ms == pytest.approx(typical)
    assert "eager prefill host floor" in c.source
    # no eager row host-bound: no floor
    gpu_bound = [_row(1, 1, 1.0, 1.1), _row(2, 1, 0.8, 0.85), _row(1, 16, 12.0, None)]
    c = calibrate(Compute(H200), shape.with_layers(8), gpu_bound, 1, 512, 2)
    assert c.host_kernel_ms == 0 and c.host_collective_ms == 0


def _comms(gpus: int) -> Comms:
    rows = [replace(r, world_size=n) for n in (2, 4, 8) for r in flat_curve_rows(20.0)]
    rows += [replace(r, op="sendrecv", world_size=2) for r in flat_curve_rows(10.0)]
    return Comms(MeasuredComm(rows, "flat"), PROJ)


@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 8])
@pytest.mark.parametrize(("name", "layers"), [("llama3-8b", 8), ("qwen3-30b-a3b", 8)])
def test_every_split_small_batch_pipeline_prefill_meets_the_host_floor(
    gpus: int, name: str, layers: int
) -> None:
    shape = model(name).with_layers(layers)
    plain = Compute(H200, compiled=True)
    floor = Compute(H200, compiled=True, host_kernel_ms=0.03, host_collective_ms=0.05)
    wl = Workload(4, 512, 64)
    big = Workload(32, 2048, 64)
    seen, bound = [], []
    for tp, pp, why in splits(shape, gpus):
        if why is not None:
            continue
        seen.append((tp, pp))
        placement = place(no_topology(gpus), gpus, tp, pp)
        a = predict(shape, tp, pp, wl, _comms(gpus), plain, placement, H200.memory_gib)
        b = predict(shape, tp, pp, wl, _comms(gpus), floor, placement, H200.memory_gib)
        assert a.prefill is not None and b.prefill is not None
        assert a.decode is not None and b.decode is not None
        assert b.decode.time_ms == a.decode.time_ms  # decode steps are graph replays
        if pp == 1:  # a graph replay: no host floor
            assert b.prefill.time_ms == a.prefill.time_ms
            continue
        # 4 chunks of one 512-token sequence on layers/pp layers: the host's launches
        host = [floor.prefill_host_ms(shape, tp, pp, s, 2 * ((s > 0) + (s < pp - 1)))
                for s in range(pp)]  # fmt: skip
        assert b.prefill.units == min(4, pp)  # chunks: at least m = min(pp, batch)
        # every stage's host issues all the chunks (side by side with the other stages')
        assert b.prefill.time_ms >= b.prefill.units * max(host) - 1e-9
        assert b.prefill.time_ms >= a.prefill.time_ms
        if max(host) > a.prefill.stage_ms:  # the host, not the GPU, sets the pace
            assert b.prefill.time_ms > a.prefill.time_ms
            bound.append((tp, pp))
        # a large batch keeps the GPU busier than the host: the floor does not bind
        c = predict(shape, tp, pp, big, _comms(gpus), plain, placement, H200.memory_gib)
        d = predict(shape, tp, pp, big, _comms(gpus), floor, placement, H200.memory_gib)
        assert c.prefill is not None and d.prefill is not None
        if max(host) < c.prefill.stage_ms:
            assert d.prefill.time_ms == pytest.approx(c.prefill.time_ms)
        else:  # 3B active parameters on 8 GPUs: even 8k-token chunks are host-bound
            assert name == "qwen3-30b-a3b" and gpus == 8
    assert (1, gpus) in seen  # a pipeline over every GPU is always possible
    if gpus >= 4:  # 1 or 2 layers a stage, one 512-token prompt a chunk
        assert (1, gpus) in bound
    if gpus == 3:
        assert seen == [(1, 3)]  # 32 heads do not split 3 ways


def test_moe_prefill_reads_the_experts_its_chunk_reaches() -> None:
    """PP=4 at batch 4: each chunk is one 512-token prompt on 2 layers; 512 tokens x top-8
    reach all 128 experts, so each chunk reads every expert of its stage's layers: four
    chunks read them four times where TP=4 reads a quarter of each once."""
    shape = model("qwen3-30b-a3b").with_layers(8)
    c = Compute(H200)
    one_chunk = c.prefill_ms(shape, 1, 4, 1, 1, 512, 2)
    whole = c.prefill_ms(shape, 4, 1, 0, 4, 512, 2)
    experts = 2 * 128 * 3 * 2048 * 768 * 2 / 4000e9 * 1e3  # 2 layers' experts, ms
    assert one_chunk >= experts
    assert 4 * one_chunk > 1.5 * whole


@pytest.mark.parametrize("pp", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("chunks", [1, 2, 4])
def test_pipeline_without_host_floor_is_fill_plus_slowest_stage(pp: int, chunks: int) -> None:
    gpu = [1.0 + 0.5 * (s % 2) for s in range(pp)]
    sends = [0.1] * (pp - 1) + [0.0]
    want = (chunks - 1) * max(gpu) + sum(gpu) + sum(sends)
    assert pipeline_ms(gpu, sends, [0.0] * pp, chunks) == pytest.approx(want)


@pytest.mark.parametrize("pp", [2, 4, 8])
def test_host_bound_stages_issue_side_by_side(pp: int) -> None:
    """Each stage's host issues its chunks from the start (a receive is queued on the GPU,
    not waited for): 4 chunks of 3 ms of launches and 1 ms of GPU work per stage end
    after 4 x 3 ms on stage 0 plus one chunk's GPU time and send per further stage, not
    after (4 + pp - 1) x 3 ms."""
    got = pipeline_ms([1.0] * pp, [0.1] * (pp - 1) + [0.0], [3.0] * pp, 4)
    assert got == pytest.approx(4 * 3.0 + (pp - 1) * 1.1)
    assert got < (4 + pp - 1) * 3.0
    # one slow host among fast ones sets the pace for the chunks after it
    host = [0.0] * pp
    host[pp - 1] = 2.0
    assert pipeline_ms([1.0] * pp, [0.0] * pp, host, 4) == pytest.approx(max(8.0, pp + 3.0))


def test_host_floor_from_the_host_bound_tensor_parallel_row_only() -> None:
    """Only the TP=2 eager prefill is host-bound (15.5 ms against a 9.4 ms replay); the
    TP=1 one (12.6 against 11.4) is GPU-bound, so its time is not the host's: the floor is
    the host-bound pass's time per launch, kernels and collectives alike."""
    shape = model("qwen3-30b-a3b").with_layers(8)
    name = "qwen3-30b-a3b"
    k2, c2 = stage_launches(shape, 2, 1, 0, True)
    rows = [_row(1, 4, 11.4, 12.6, name=name), _row(2, 4, 9.4, 15.5, name=name)]
    c = calibrate(Compute(H200), shape, rows, 4, 512, 2)
    assert c.host_kernel_ms == pytest.approx(15.5 / (k2 + c2))
    assert c.host_collective_ms == pytest.approx(c.host_kernel_ms)
    assert "median of 1 passes" in c.source


def _sized_rows(truth: Compute, name: str) -> list[dict[str, Any]]:
    shape = model(name).with_layers(8)
    rows = []
    for tp in (1, 2):
        for batch, input_len in ((4, 512), (32, 512), (4, 2048), (8, 2048)):
            t = truth.prefill_ms(shape, tp, 1, 0, batch, input_len, 2)
            r = _row(tp, batch, t, None, name=name)
            r["input_len"] = input_len
            rows.append(r)
    return rows


@pytest.mark.parametrize("name", ["llama3-8b", "qwen3-30b-a3b"])
def test_prefill_fit_over_sizes_finds_the_cost_per_chunk(name: str) -> None:
    """Rows at several prompt sizes and two TP degrees timed as 1.1 x roofline + 0.4 ms
    per GB + 9 us per kernel: the fit finds all three, so a pipeline's chunk of a quarter
    of the tokens is not taken as a quarter of the time."""
    truth = Compute(H200, prefill_scale=1.1, prefill_unit_ms=0.4, prefill_kernel_ms=0.009,
                    compiled=True)  # fmt: skip
    shape = model(name).with_layers(8)
    c = calibrate(Compute(H200), shape, _sized_rows(truth, name), 4, 512, 2)
    assert c.prefill_scale == pytest.approx(1.1, rel=1e-6)
    assert c.prefill_unit_ms == pytest.approx(0.4, rel=1e-6)
    assert c.prefill_kernel_ms == pytest.approx(0.009, rel=1e-6)
    assert "per kernel of a chunk" in c.source
    for tp, pp, stage in ((4, 1, 0), (2, 2, 1), (1, 4, 3)):
        want = truth.prefill_ms(shape, tp, pp, stage, 1, 512, 2)
        assert c.prefill_ms(shape, tp, pp, stage, 1, 512, 2) == pytest.approx(want, rel=1e-6)
    # rows of one size only: the per-chunk term cannot be told apart; the old fit
    one_size = [r for r in _sized_rows(truth, name) if (r["batch"], r["input_len"]) == (4, 512)]
    c = calibrate(Compute(H200), shape, one_size, 4, 512, 2)
    assert c.prefill_kernel_ms == 0.0


def test_pipeline_sends_are_timed_on_the_eager_curve() -> None:
    """gpulane tokens sends between stages with isend/irecv outside its CUDA graphs: a
    send takes the eager sendrecv curve where there is one, the graph curve otherwise."""
    graph = [replace(r, op="sendrecv", world_size=2, graph=True)
             for r in flat_curve_rows(5.0)]  # fmt: skip
    eager = [replace(r, op="sendrecv", world_size=2, graph=False)
             for r in flat_curve_rows(30.0)]  # fmt: skip
    both = MeasuredComm(graph + eager, "flat")
    got = both.time("send", 2, 8192)
    assert got is not None and got.time_us == pytest.approx(30.0) and "graph" not in got.source
    only_graph = MeasuredComm(graph, "flat").time("send", 2, 8192)
    assert only_graph is not None and only_graph.time_us == pytest.approx(5.0)
    # collectives inside a step keep the graph replays first
    ar = [replace(r, world_size=2, graph=g) for g in (True, False)
          for r in flat_curve_rows(5.0 if g else 30.0)]  # fmt: skip
    got = MeasuredComm(ar, "flat").time("all_reduce", 2, 8192)
    assert got is not None and got.time_us == pytest.approx(5.0)


def _clocked(tp: int, batch: int, graph_ms: float, host_ms: float, name: str = "qwen3-30b-a3b",
             input_len: int = 512) -> dict[str, Any]:  # fmt: skip
    """A calibration row whose eager prefill was GPU-bound (eager 1.1 x the replay) and
    whose host's clock around it says how long the launches took."""
    r = _row(tp, batch, graph_ms, 1.1 * graph_ms, name=name)
    r["input_len"] = input_len
    r["extra"]["eager_host_ms"] = host_ms
    return r


def test_host_floor_from_the_hosts_clock_where_the_gpu_hides_it() -> None:
    """Round 3's call: every eager prefill was GPU-bound (the MoE's TP=2 one 10.6 against
    a 9.3 ms replay), so the eager times only bound the host, and the floor was lost. The
    host's clock around the eager call gives it: 40 us a kernel, 150 us a collective."""
    shape = model("qwen3-30b-a3b").with_layers(8)
    name = "qwen3-30b-a3b"
    k1, _ = stage_launches(shape, 1, 1, 0, True)
    k2, c2 = stage_launches(shape, 2, 1, 0, True)
    rows = [_clocked(1, 4, 11.4, k1 * 0.04), _clocked(1, 32, 62.0, k1 * 0.045),
            _clocked(2, 4, 9.3, k2 * 0.04 + c2 * 0.15), _clocked(2, 32, 51.0, k2 * 0.05 + c2 * 0.2)]  # fmt: skip
    c = calibrate(Compute(H200), shape, rows, 4, 512, 2)
    paces = sorted([0.04, 0.045, (k2 * 0.04 + c2 * 0.15) / (k2 + c2),
                    (k2 * 0.05 + c2 * 0.2) / (k2 + c2)])  # fmt: skip
    assert c.host_kernel_ms == pytest.approx((paces[1] + paces[2]) / 2)  # the typical pass
    assert c.host_collective_ms == pytest.approx(c.host_kernel_ms)
    assert "the host's clock around 4 eager prefills" in c.source
    # the same rows without the clock: GPU-bound, the floor unknown, and the model says so
    for r in rows:
        del r["extra"]["eager_host_ms"]
    c = calibrate(Compute(H200), shape, rows, 4, 512, 2)
    assert c.host_kernel_ms == 0 and c.host_collective_ms == 0
    assert "host floor not seen" in c.source
    per = 9.3 * 1.1 / (k2 + c2)  # the TP=2 batch-4 pass, the tightest bound a launch
    assert f"at most {per * 1e3:.1f} us a launch" in c.source
    # a host-bound row beside clocked ones: the clock wins (it is the host's time itself)
    mixed = [_clocked(1, 4, 11.4, k1 * 0.03), _row(1, 4, 11.4, 20.0, name=name)]
    c = calibrate(Compute(H200), shape, mixed, 4, 512, 2)
    assert c.host_kernel_ms == pytest.approx(0.03)


def test_host_floor_stays_with_its_model() -> None:
    """The host's time a launch differs between models (the experts' routing of 128
    experts is not that of 8): a model whose eager prefills hide the host behind its GPU
    work does not take the floor another model's host-bound rows show."""
    dense = model("qwen2.5-72b").with_layers(8)
    moe = model("qwen3-30b-a3b").with_layers(8)
    k1, _ = stage_launches(moe, 1, 1, 0, True)
    rows = [_row(1, 4, 41.7, 42.0, name="qwen2.5-72b"), _row(2, 4, 23.3, 23.8, name="qwen2.5-72b"),
            _row(1, 4, 5.0, k1 * 0.04, name="qwen3-30b-a3b")]  # fmt: skip
    c = calibrate(Compute(H200), dense, rows, 4, 512, 2)
    assert c.host_kernel_ms == 0 and "host floor not seen" in c.source
    assert "qwen3" not in c.source
    c = calibrate(Compute(H200), moe, rows, 4, 512, 2)
    assert c.host_kernel_ms == pytest.approx(0.04)


@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 8])
def test_clocked_floor_sets_every_small_chunk_pipeline(gpus: int) -> None:
    """Calibrated from clocked rows, every pipeline split of 1, 2, 3, 4 and 8 GPUs at batch
    4, input 512 takes at least its chunks x its busiest host's time per chunk, and is
    the pipeline of its stages' GPU times, sends and host times; pp=1 splits (graph
    replays) take no floor."""
    shape = model("qwen3-30b-a3b").with_layers(8)
    k1, _ = stage_launches(shape, 1, 1, 0, True)
    k2, c2 = stage_launches(shape, 2, 1, 0, True)
    rows = [_clocked(1, 4, 11.4, k1 * 0.04), _clocked(2, 4, 9.3, k2 * 0.04 + c2 * 0.15)]
    c = calibrate(Compute(H200), shape, rows, 4, 512, 2)
    plain = Compute(c.gpu, c.decode_scale, c.prefill_scale, c.source, c.decode_unit_ms,
                    c.prefill_unit_ms, c.prefill_kernel_ms, c.compiled)  # fmt: skip
    wl = Workload(4, 512, 64)
    pipelines = 0
    for tp, pp, why in splits(shape, gpus):
        if why is not None:
            continue
        placement = place(no_topology(gpus), gpus, tp, pp)
        a = predict(shape, tp, pp, wl, _comms(gpus), plain, placement, H200.memory_gib)
        b = predict(shape, tp, pp, wl, _comms(gpus), c, placement, H200.memory_gib)
        assert a.prefill is not None and b.prefill is not None
        if pp == 1:
            assert b.prefill.time_ms == a.prefill.time_ms
            continue
        pipelines += 1
        host = [c.prefill_host_ms(shape, tp, pp, s, 2 * ((s > 0) + (s < pp - 1)))
                for s in range(pp)]  # fmt: skip
        assert min(host) > 0
        assert b.prefill.time_ms >= b.prefill.units * max(host) - 1e-9
        assert b.prefill.time_ms > a.prefill.time_ms  # one 512-token prompt a chunk
    assert pipelines == {1: 0, 2: 1, 3: 1, 4: 2, 8: 3}[gpus]  # pp > 1 splits the heads allow


def test_host_floor_is_the_typical_pass_not_the_tightest() -> None:
    """Round 3b's call: the same eager pass of qwen3-30b-a3b took the host 41 to 63 us a
    launch from pass to pass, and its host-bound pipeline issued at 58 us where the
    tightest calibration pass said 44. The floor is the median pass; a TP pass whose
    eager GPU time is host-bound and longer than rank 0's clock (the GPUs waited at the
    all-reduces for the group's slower host) counts at its eager time."""
    shape = model("qwen3-30b-a3b").with_layers(8)
    k1, _ = stage_launches(shape, 1, 1, 0, True)
    k2, c2 = stage_launches(shape, 2, 1, 0, True)
    rows = [_clocked(1, 4, 11.3, k1 * 0.0545), _clocked(1, 32, 61.7, k1 * 0.044),
            _clocked(2, 32, 50.9, (k2 + c2) * 0.0634)]  # fmt: skip
    slow = _clocked(2, 4, 9.2, (k2 + c2) * 0.0416)  # rank 0 issued at 41.6 us a launch,
    slow["extra"]["eager_ms"] = (k2 + c2) * 0.0578  # the group's eager pass ran at 57.8
    c = calibrate(Compute(H200), shape, [*rows, slow], 4, 512, 2)
    assert c.host_kernel_ms == pytest.approx((0.0545 + 0.0578) / 2)
    assert c.host_kernel_ms > 0.044 + 0.01  # well above the tightest pass
    assert "median of 4 passes at 44.0-63.4 us a launch" in c.source
    # the same pass GPU-bound (eager under 1.2 x the replay): rank 0's clock stands
    slow["extra"]["eager_ms"] = 1.1 * 9.2
    c = calibrate(Compute(H200), shape, [*rows, slow], 4, 512, 2)
    assert c.host_kernel_ms == pytest.approx((0.044 + 0.0545) / 2)


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_typical_floor_predicts_the_host_bound_pipeline_at_the_pace_it_ran(gpus: int) -> None:
    """Calibration passes at 44, 54.5, 57.8 and 63.4 us a launch: a pipeline of one
    512-token prompt a chunk takes at least its chunks x its busiest stage's launches at
    the median pace (56.2 us), longer than at the tightest (44 us)."""
    shape = model("qwen3-30b-a3b").with_layers(8)
    k1, _ = stage_launches(shape, 1, 1, 0, True)
    k2, c2 = stage_launches(shape, 2, 1, 0, True)
    rows = [_clocked(1, 4, 11.3, k1 * 0.0545), _clocked(1, 32, 61.7, k1 * 0.044),
            _clocked(2, 4, 9.2, (k2 + c2) * 0.0578), _clocked(2, 32, 50.9, (k2 + c2) * 0.0634)]  # fmt: skip
    c = calibrate(Compute(H200), shape, rows, 4, 512, 2)
    tight = Compute(c.gpu, c.decode_scale, c.prefill_scale, c.source, c.decode_unit_ms,
                    c.prefill_unit_ms, c.prefill_kernel_ms, c.compiled, 0.044, 0.044)  # fmt: skip
    wl = Workload(4, 512, 64)
    placement = place(no_topology(gpus), gpus, 1, gpus)
    typical = predict(shape, 1, gpus, wl, _comms(gpus), c, placement, H200.memory_gib)
    best = predict(shape, 1, gpus, wl, _comms(gpus), tight, placement, H200.memory_gib)
    assert typical.prefill is not None and best.prefill is not None
    host = max(c.prefill_host_ms(shape, 1, gpus, s, 2 * ((s > 0) + (s < gpus - 1)))
               for s in range(gpus))  # fmt: skip
    assert typical.prefill.time_ms >= typical.prefill.units * host - 1e-9
    assert typical.prefill.time_ms > best.prefill.time_ms
