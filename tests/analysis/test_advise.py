"""TP vs PP advice: the model's arithmetic by hand, interpolation over the measured H200
curves, and recommendations on constructed builds where the answer is clear."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpulane.analysis import advise as A
from gpulane.analysis.advise_command import main
from gpulane.collectives.nccl_tests.logs import rows_from_file
from gpulane.errors import InputError
from gpulane.inference.shapes import ModelShape, shape_from_config
from gpulane.record import read_rows
from gpulane.topology.model import Gpu, Pair, PcieLink, Topology
from tests.conftest import fixture_path

CONF = Path(__file__).parents[2] / "gpulane" / "conf" / "model"
H200 = A.GpuSpec("H200", hbm_gbps=4000.0, tflops=700.0, memory_gib=140.4)
H100 = A.GpuSpec("H100", hbm_gbps=2850.0, tflops=690.0, memory_gib=79.6)
PROJ = A.Projection({"nvlink": 0.72, "pcie": 0.80}, {"nvlink": 6.0, "pcie": 10.0})


def model(name: str) -> ModelShape:
    import yaml

    return shape_from_config(yaml.safe_load((CONF / f"{name}.yaml").read_text()))


def small() -> ModelShape:
    return ModelShape(name="small", hidden_size=1024, num_layers=4, num_heads=8,
                      num_kv_heads=8, head_dim=128, intermediate_size=4096,
                      vocab_size=1024)  # fmt: skip


def flat_curve_rows(t_us: float, ops: tuple[str, ...] = ("all_reduce", "all_gather")) -> list:  # type: ignore[type-arg]
    """A build whose collectives take ``t_us`` at every size (2 ranks)."""
    return [
        {"kind": "collective", "backend": "nccl", "op": op, "build": "flat", "world_size": 2,
         "dtype": "bfloat16", "size_bytes": s, "time_us": t_us, "graph": True, "path": None}
        for op in ops
        for s in (8, 1 << 30)
    ]  # fmt: skip


@dataclass(frozen=True)
class FixedCompute(A.Compute):
    """Compute that takes a fixed time per stage, whatever the split: for hand arithmetic."""

    dec: float = 1.0
    pre: float = 5.0

    def decode_ms(self, *args: Any) -> float:
        return self.dec

    def prefill_ms(self, *args: Any) -> float:
        return self.pre


def no_topology(n: int) -> Topology:
    return A.synthetic_topology(n, "H200")


# -- the arithmetic, by hand -------------------------------------------------------------


def test_decode_and_prefill_of_tp2_by_hand() -> None:
    shape = small()  # 4 layers: 2 x 4 + 1 (embedding) = 9 all-reduces, 1 logits all-gather
    comms = A.Comms(A.MeasuredComm(flat_curve_rows(10.0)), PROJ)
    wl = A.Workload(batch=4, input_len=16, output_len=8, chunk_tokens=32)
    placement = A.place(no_topology(2), 2, 2, 1)
    p = A.predict(shape, 2, 1, wl, comms, FixedCompute(H200), placement, 140.0)
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
    comms = A.Comms(A.MeasuredComm(flat_curve_rows(10.0)), PROJ)
    placement = A.place(no_topology(2), 2, 1, 2)
    # batch 4 in 2 micro-batches: each stage 1 ms per micro-batch; sends: hidden and
    # residual (2 x 10 us, as 2-rank all_gathers), tokens back (10 us)
    wl = A.Workload(batch=4, input_len=16, output_len=8, chunk_tokens=1 << 20)
    p = A.predict(shape, 1, 2, wl, comms, FixedCompute(H200), placement, 140.0)
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
    p1 = A.predict(shape, 1, 2, A.Workload(1, 16, 8), comms, FixedCompute(H200), placement, 140)
    assert p1.decode is not None and p1.decode.time_ms == pytest.approx(2.03)
    assert p1.decode.bubble_share == pytest.approx(1 - 1.0 / 2.03)


def test_roofline_decode_of_70b_by_hand() -> None:
    shape = model("llama3-70b")
    # per layer per TP=2 rank: 2 norms + QKV (32 + 2 x 4 heads of 128) + o_proj (4096 in)
    # + gate/up/down (14336 wide)
    h = 8192
    layer = 2 * h + h * 5120 + 4096 * h + 3 * h * 14336
    params = 80 * layer + 2 * 64128 * h + h  # embedding and LM head halves, final norm
    kv = 80 * 2 * 512 * 1 * 2304 * 2  # layers x K,V x kv_size x batch x cache_len x bytes
    want_ms = (params * 2 + kv) / 4000e9 * 1e3
    got = A.Compute(H200).decode_ms(shape, 2, 1, 0, 1, 2304, 2)
    assert got == pytest.approx(want_ms) and got == pytest.approx(17.73, abs=0.01)
    # prefill is compute-bound: 2 x weights x tokens / 700 TFLOP/s, plus attention
    pre = A.Compute(H200).prefill_ms(shape, 2, 1, 0, 1, 2048, 2)
    assert pre == pytest.approx(2 * 34.2e9 * 2048 / 700e12 * 1e3, rel=0.05)
    scaled = A.Compute(H200, decode_scale=1.5).decode_ms(shape, 2, 1, 0, 1, 2304, 2)
    assert scaled == pytest.approx(1.5 * got)


def test_rule_of_thumb_beside_the_prediction() -> None:
    shape = small()
    comms = A.Comms(None, PROJ)
    topo, _ = A.apply_what_if(no_topology(2), "pcie:3x4")
    placement = A.place(topo, 2, 2, 1)
    assert placement.tp_label == "PHB" and placement.tp_gbps == pytest.approx(3.94)
    wl = A.Workload(batch=64, input_len=16, output_len=8)
    p = A.predict(shape, 2, 1, wl, comms, FixedCompute(H200, dec=0.1), placement, 140)
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
    got = {(tp, pp): why for tp, pp, why in A.splits(shape, 3)}
    assert got[(1, 3)] is None and "not divisible by tp=3" in str(got[(3, 1)])
    comms = A.Comms(None, PROJ)
    p = A.predict(shape, 1, 1, A.Workload(1, 2048, 256), comms, A.Compute(H100),
                  A.place(no_topology(1), 1, 1, 1), H100.memory_gib)  # fmt: skip
    assert not p.fits and p.decode is None and "per GPU" in str(p.refused)


def test_gpu_spec_lookup_and_overrides() -> None:
    specs = {"H100": {"hbm_gbps": 2850, "tflops": 690, "memory_gib": 79.6},
             "H100 PCIe": {"hbm_gbps": 1700, "tflops": 530, "memory_gib": 79.6}}  # fmt: skip
    assert A.gpu_spec(specs, "NVIDIA H100 80GB HBM3").name == "H100"
    assert A.gpu_spec(specs, "NVIDIA H100 PCIe").hbm_gbps == 1700
    s = A.gpu_spec(specs, "NVIDIA H100 80GB HBM3", hbm_gbps=3000.0)
    assert s.hbm_gbps == 3000 and "hbm_gbps given" in s.source
    with pytest.raises(InputError, match="gpu=NAME"):
        A.gpu_spec(specs, "Mystery GPU")
    assert A.gpu_spec(specs, None, 1.0, 2.0, 3.0).tflops == 2.0


def test_calibration_on_a_tokens_run() -> None:
    shape = model("llama3-8b")
    roof = A.Compute(H200).decode_ms(shape, 2, 1, 0, 8, 640, 2)
    rows = [
        {"kind": "tokens", "op": "decode", "model": "llama3-8b", "tp": 2, "pp": 1,
         "batch": 8, "input_len": 512, "output_len": 128, "layers": 32, "run_id": "t",
         "time_us": 4000.0, "extra": {"compute_only_ms": 1.25 * roof}},
        {"kind": "tokens", "op": "decode", "model": "other", "tp": 2, "pp": 1, "batch": 8,
         "input_len": 512, "output_len": 128, "extra": {"compute_only_ms": 99.0}},
    ]  # fmt: skip
    c = A.calibrate(A.Compute(H200), shape, rows, 8, 512, 2)
    assert c.decode_scale == pytest.approx(1.25) and c.prefill_scale == 1.0
    assert "calibrated" in c.source and "tp=2 batch 8" in c.source
    assert A.calibrate(A.Compute(H200), shape, rows[1:], 8, 512, 2).source == "roofline"


def test_calibration_across_tp_degrees_finds_the_part_that_does_not_split() -> None:
    shape = model("llama3-8b")
    base = A.Compute(H200)
    a, b_ms = 1.15, 0.040  # 15 % above the roofline, plus 40 us per layer
    rows = []
    for tp in (1, 2):
        roof = base.decode_ms(shape, tp, 1, 0, 1, 1088, 2)
        rows.append(
            {"kind": "tokens", "op": "decode", "model": "llama3-8b", "tp": tp, "pp": 1,
             "batch": 1, "input_len": 1024, "output_len": 64, "layers": 32, "run_id": f"t{tp}",
             "time_us": 1e3 * (a * roof + 32 * b_ms),
             "extra": {"compute_only_ms": None if tp == 1 else a * roof + 32 * b_ms}}
        )  # fmt: skip
    c = A.calibrate(base, shape, rows, 1, 1024, 2)
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
    one = A.calibrate(base, shape, rows[1:], 1, 1024, 2)
    assert one.decode_layer_ms == 0.0 and one.decode_scale > a
    # a fit that needs a negative fixed time is refused: the plain factor again
    rows[0]["time_us"] *= 0.5
    assert A.calibrate(base, shape, rows, 1, 1024, 2).decode_layer_ms == 0.0


# -- interpolation over the measured H200 curves -------------------------------------------


def h200_rows() -> list[dict[str, Any]]:
    return list(read_rows(fixture_path("advise/nvlink-rows.jsonl")))


def test_measured_curves_prefer_graph_replays_and_cover_large_sizes() -> None:
    m = A.MeasuredComm(h200_rows())
    assert m.build == "nvlink"
    labels = [g.label for g in m.groups[("all_reduce", 2)]]
    assert labels[0] == "nccl graph bfloat16" and "nccl float" in labels
    graph = m.groups[("all_reduce", 2)][0].curve
    # a measured size: the graph replay's median
    i = graph.sizes.index(16384)
    assert m.time("all_reduce", 2, 16384) == A.CommTime(graph.times_us[i], "measured nccl graph bfloat16", False)  # fmt: skip
    # between two sizes: log-log
    lo, hi = graph.sizes.index(1 << 20), graph.sizes.index(1 << 21)
    t = m.time("all_reduce", 2, 3 << 19)
    assert t is not None
    frac = math.log(1.5) / math.log(2)
    want = math.exp(math.log(graph.times_us[lo]) * (1 - frac) + math.log(graph.times_us[hi]) * frac)
    assert t.time_us == pytest.approx(want) and not t.extrapolated
    # above the graph sweep's 64 MiB: the eager sweep that went to 8 GiB
    big = m.time("all_reduce", 2, 256 << 20)
    assert big is not None and big.source == "measured nccl float" and not big.extrapolated
    assert 700 < big.time_us < 1000  # 256 MiB at about 300 GB/s of bus bandwidth
    # above everything: linear in size
    huge = m.time("all_reduce", 2, 16 << 30)
    assert huge is not None and huge.extrapolated
    widest = max(m.groups[("all_reduce", 2)], key=lambda g: g.curve.sizes[-1]).curve
    assert widest.sizes[-1] == 8 << 30
    assert huge.time_us == pytest.approx(2 * widest.times_us[-1])
    assert m.peak_busbw("all_reduce", 2) == pytest.approx(345, rel=0.05)


def test_sends_from_a_two_rank_all_gather_of_twice_the_size() -> None:
    rows = [r.to_dict() for name in ("nt-all_reduce-pcie-host.txt", "nt-all_gather-pcie-host.txt")
            for r in rows_from_file(fixture_path(f"advise/{name}"), build="pcie-host")]  # fmt: skip
    m = A.MeasuredComm(rows)
    send = m.time("send", 2, 1 << 20)
    ag = m.time("all_gather", 2, 2 << 20)
    assert send is not None and ag is not None
    assert send.time_us == ag.time_us and "all_gather of 2x" in send.source
    sr = [{**r, "op": "sendrecv", "time_us": 7.0} for r in flat_curve_rows(1.0, ("x",))]
    m2 = A.MeasuredComm(sr + flat_curve_rows(3.0))
    got = m2.time("send", 2, 4096)
    assert got is not None and got.time_us == pytest.approx(7.0)


def test_several_builds_need_a_choice() -> None:
    rows = h200_rows() + flat_curve_rows(1.0)
    with pytest.raises(InputError, match="build=LABEL"):
        A.MeasuredComm(rows)
    assert A.MeasuredComm(rows, "flat").time("all_reduce", 2, 1 << 20) == A.CommTime(
        1.0, "measured nccl graph bfloat16", False
    )


def test_h200_nvlink_vs_socket_for_8b() -> None:
    """On the measured NVLink build TP=2 wins decode; on the socket build (about 4 GB/s)
    the all-reduces take most of a TP=2 step at batch 16 and PP=2 wins."""
    topo = A.topology_from_json(json.loads(fixture_path("advise/topology-h200x2.json").read_text()))
    socket = [r.to_dict() for r in rows_from_file(fixture_path("advise/nt-all_reduce-socket.txt"), build="socket")]  # fmt: skip
    shape = model("llama3-8b")
    out = {}
    for build, rows in (("nvlink", h200_rows()), ("socket", socket)):
        comms = A.Comms(A.MeasuredComm(rows), PROJ)
        preds = []
        for batch in (1, 16):
            wl = A.Workload(batch, 1024, 64)
            for tp, pp, _ in A.splits(shape, 2):
                preds.append(A.predict(shape, tp, pp, wl, comms, A.Compute(H200),
                                       A.place(topo, 2, tp, pp), H200.memory_gib))  # fmt: skip
        out[build] = {r.goal: r for r in A.recommend(preds, [1, 16], build)}
    assert out["nvlink"]["throughput"].choice is not None
    assert out["nvlink"]["throughput"].choice.name == "TP=2"
    assert out["nvlink"]["latency"].choice is not None
    assert out["nvlink"]["latency"].choice.name == "TP=2"
    sock = out["socket"]["throughput"]
    assert sock.choice is not None and sock.choice.name == "PP=2"
    assert any("all-reduce" in line and "TP=2" in line for line in sock.reasons)


# -- constructed builds --------------------------------------------------------------------


def box(n: int, nv_pairs: set[tuple[int, int]], gen: int, width: int) -> Topology:
    """``n`` H200s on PCIe Gen``gen`` x``width``; the given pairs bonded by 18 NVLinks,
    the others through the CPUs (SYS)."""
    gpus = [Gpu(name=f"GPU{i}", index=i, model="NVIDIA H200",
                pcie=PcieLink(gen=gen, gen_max=gen, width=width, width_max=width))
            for i in range(n)]  # fmt: skip
    pairs = []
    for a in range(n):
        for b in range(a + 1, n):
            nv = (a, b) in nv_pairs
            pairs.append(Pair(a=f"GPU{a}", b=f"GPU{b}", label="NV18" if nv else "SYS",
                              kind="nvlink" if nv else "sys", nvlinks=18 if nv else None))  # fmt: skip
    return Topology(gpus=gpus, pairs=pairs)


def advise_on(topo: Topology, batches: list[int], input_len: int, output_len: int) -> dict:  # type: ignore[type-arg]
    shape = model("llama3-70b")
    comms = A.Comms(None, PROJ, projected_only=True)
    preds = []
    for batch in batches:
        wl = A.Workload(batch, input_len, output_len)
        for tp, pp, why in A.splits(shape, 4):
            assert why is None
            preds.append(A.predict(shape, tp, pp, wl, comms, A.Compute(H200),
                                   A.place(topo, 4, tp, pp), H200.memory_gib))  # fmt: skip
    return {r.goal: r for r in A.recommend(preds, batches, "box")}


def all_pairs(n: int) -> set[tuple[int, int]]:
    return {(a, b) for a in range(n) for b in range(a + 1, n)}


def test_nvlink_box_vs_x4_gen3_risers_flip_between_tp_and_pp() -> None:
    """70B on 4 GPUs, batch 32: all-NVLink wants TP=4; the same box with every GPU on a
    Gen3 x4 riser (no NVLink) wants pipeline stages, whose sends are small: TP=4 would
    spend most of each decode step in all-reduce."""
    nvlink = advise_on(box(4, all_pairs(4), 5, 16), [32], 2048, 256)
    risers, desc = A.apply_what_if(box(4, all_pairs(4), 5, 16), "pcie:3x4")
    assert "Gen3 x4" in desc and "projection" in desc
    riser = advise_on(risers, [32], 2048, 256)
    assert nvlink["throughput"].choice is not None and riser["throughput"].choice is not None
    assert nvlink["throughput"].choice.name == "TP=4"
    assert riser["throughput"].choice.pp > 1
    assert any("TP=4" in line and "all-reduce" in line for line in riser["throughput"].reasons)
    # a prefill-heavy request at batch 1 (2048 tokens in, 2 out) flips the same way
    nv1 = advise_on(box(4, all_pairs(4), 5, 16), [1], 2048, 2)["latency"].choice
    rs1 = advise_on(risers, [1], 2048, 2)["latency"].choice
    assert nv1 is not None and rs1 is not None
    assert nv1.name == "TP=4" and rs1.name == "PP=4"


def test_nvlink_pairs_keep_all_reduce_on_the_pairs() -> None:
    """GPU0-GPU2 and GPU1-GPU3 bonded by NVLink, the rest over Gen3 x4 through the CPUs:
    TP groups go on the NVLink pairs and PP=2xTP=2 wins over TP=4."""
    topo = box(4, {(0, 2), (1, 3)}, 3, 4)
    placement = A.place(topo, 4, 2, 2)
    assert set(placement.groups) == {("GPU0", "GPU2"), ("GPU1", "GPU3")}
    assert placement.tp_label == "NV18" and placement.pp_label == "SYS"
    assert A.place(topo, 4, 4, 1).tp_label == "SYS"
    rec = advise_on(topo, [32], 2048, 256)["throughput"]
    assert rec.choice is not None and rec.choice.name == "PP=2xTP=2"
    text = " ".join(rec.reasons)
    assert "keeps all-reduce on NV18" in text and "GPU0+GPU2 | GPU1+GPU3" in text


def test_what_if_spec_errors() -> None:
    with pytest.raises(InputError, match="pcie:GENxWIDTH"):
        A.apply_what_if(no_topology(2), "risers")
    with pytest.raises(InputError, match="Gen9"):
        A.apply_what_if(no_topology(2), "pcie:9x4")
    topo, _ = A.apply_what_if(no_topology(4), "nvlink:18")
    assert {p.label for p in topo.pairs} == {"NV18"} and len(topo.pairs) == 6


# -- the command ---------------------------------------------------------------------------


def test_command_json_on_the_h200_rows(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["model=llama3-70b", "gpus=2", "batch=1,32", "input_len=2048", "output_len=256",
            f"run={fixture_path('advise/nvlink-rows.jsonl')}",
            f"topology={fixture_path('advise/topology-h200x2.json')}", "format=json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["build"] == "nvlink" and doc["gpu"]["name"] == "H200" and not doc["projection"]
    assert {(p["name"], p["batch"]) for p in doc["predictions"]} == {
        ("TP=2", 1), ("PP=2", 1), ("TP=2", 32), ("PP=2", 32)}  # fmt: skip
    assert doc["collectives"]["all_reduce over 2"] == "measured nccl graph bfloat16"
    assert {r["goal"]: r["split"] for r in doc["recommendations"]} == {
        "latency": "TP=2", "throughput": "TP=2"}  # fmt: skip
    assert "2 all-reduces per layer" in doc["model_text"]


def test_command_table_and_what_if(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["model=llama3-8b", "batch=1,16", "input_len=1024", "output_len=64",
            f"topology={fixture_path('advise/topology-h200x2.json')}", "what_if=pcie:3x4"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PROJECTION" in out and "Gen3 x4" in out and "projected PHB" in out
    assert "recommended for latency" in out and "rule of thumb" in out
    assert "2 all-reduces per layer" in out


def test_command_without_rows_says_what_to_give(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus=2", "gpu=H200"]) == 2
    assert "no collective rows" in capsys.readouterr().err
    assert main(["gpus=2", "format=yaml", "gpu=H200"]) == 2
