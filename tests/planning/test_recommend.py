"""Recommendations on measured and constructed builds where the answer is clear."""

from __future__ import annotations

import json
from dataclasses import replace

from gpulane.collectives.nccl_tests.logs import rows_from_file
from gpulane.planning.comm import Comms, MeasuredComm
from gpulane.planning.compute import Compute
from gpulane.planning.placement import apply_what_if, place
from gpulane.planning.predict import Workload, predict, splits
from gpulane.planning.recommend import explain, recommend
from gpulane.topology.model import Topology
from tests.conftest import fixture_path
from tests.planning.common import H200, PROJ, advise_on, all_pairs, box, h200_rows, model


def test_h200_nvlink_vs_socket_for_8b() -> None:
    """On the measured NVLink build TP=2 wins decode; on the socket build (about 4 GB/s)
    the all-reduces take most of a TP=2 step at batch 16 and PP=2 wins."""
    topo = Topology.from_json(json.loads(fixture_path("advise/topology-h200x2.json").read_text()))
    socket = [r for r in rows_from_file(fixture_path("advise/nt-all_reduce-socket.txt"), build="socket")]  # fmt: skip
    shape = model("llama3-8b")
    out = {}
    for build, rows in (("nvlink", h200_rows()), ("socket", socket)):
        comms = Comms(MeasuredComm(rows), PROJ)
        preds = []
        for batch in (1, 16):
            wl = Workload(batch, 1024, 64)
            for tp, pp, _ in splits(shape, 2):
                preds.append(predict(shape, tp, pp, wl, comms, Compute(H200),
                                     place(topo, 2, tp, pp), H200.memory_gib))  # fmt: skip
        out[build] = {r.goal: r for r in recommend(preds, [1, 16], build)}
    assert out["nvlink"]["throughput"].choice is not None
    assert out["nvlink"]["throughput"].choice.name == "TP=2"
    assert out["nvlink"]["latency"].choice is not None
    assert out["nvlink"]["latency"].choice.name == "TP=2"
    sock = out["socket"]["throughput"]
    assert sock.choice is not None and sock.choice.name == "PP=2"
    assert any("all-reduce" in line and "TP=2" in line for line in sock.reasons)


def test_nvlink_box_vs_x4_gen3_risers_flip_between_tp_and_pp() -> None:
    """70B on 4 GPUs, batch 32: all-NVLink wants TP=4; the same box with every GPU on a
    Gen3 x4 riser (no NVLink) wants pipeline stages, whose sends are small: TP=4 would
    spend most of each decode step in all-reduce."""
    nvlink = advise_on(box(4, all_pairs(4), 5, 16), [32], 2048, 256)
    risers, desc = apply_what_if(box(4, all_pairs(4), 5, 16), "pcie:3x4")
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
    rec = advise_on(topo, [32], 2048, 256)["throughput"]
    assert rec.choice is not None and rec.choice.name == "PP=2xTP=2"
    text = " ".join(rec.reasons)
    assert "keeps all-reduce on NV18" in text and "GPU0+GPU2 | GPU1+GPU3" in text


def _tp2_explanation(rows: list[dict], build: str) -> str:
    topo = Topology.from_json(json.loads(fixture_path("advise/topology-h200x2.json").read_text()))
    shape = model("llama3-8b")
    p = predict(shape, 2, 1, Workload(1, 1024, 64), Comms(MeasuredComm(rows), PROJ),
                Compute(H200), place(topo, 2, 2, 1), H200.memory_gib)  # fmt: skip
    return explain(p, build)


def test_explanation_names_the_transport_nccl_used_not_only_the_path() -> None:
    """The same NV18 pair: what NCCL said it used, else what its switches force (host
    memory with NCCL_P2P_DISABLE=1), else the topology label, saying which it is."""
    nvlink = h200_rows()
    said = [replace(r, transport="P2P/CUMEM") for r in nvlink]
    text = _tp2_explanation(said, "nvlink")
    assert (
        "all-reduce via P2P/CUMEM (transport NCCL reported; topology path NV18) on nvlink" in text
    )
    host = [replace(r, env={**r.env, "NCCL_P2P_DISABLE": "1"}) for r in nvlink]
    text = _tp2_explanation(host, "pcie-host")
    assert (
        "all-reduce via host memory (NCCL SHM) (NCCL_P2P_DISABLE=1 in the rows' env; "
        "topology path NV18) on pcie-host"
    ) in text
    assert "478 GB/s" not in text  # not the NVLink rate: NCCL did not use NVLink
    sockets = [replace(r, env={**r.env, "NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})
               for r in nvlink]  # fmt: skip
    assert "via NCCL sockets (NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1" in _tp2_explanation(
        sockets, "socket"
    )
    extra = [replace(r, extra={"nccl": {"transport": "P2P/IPC"}}) for r in nvlink]
    assert "via P2P/IPC (transport NCCL reported" in _tp2_explanation(extra, "nvlink")
    plain = _tp2_explanation(nvlink, "nvlink")
    assert "over NV18 (" in plain and "(topology path; NCCL's transport not recorded)" in plain
