"""Shapes, GPUs, builds and topologies the planning tests share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.inference.shapes import ModelShape, shape_from_config
from gpulane.planning.comm import Comms, Projection
from gpulane.planning.compute import Compute, GpuSpec
from gpulane.planning.placement import place, synthetic_topology
from gpulane.planning.predict import Workload, predict, splits
from gpulane.planning.recommend import Recommendation, recommend
from gpulane.record import Row, read_rows
from gpulane.topology.model import Gpu, Pair, PcieLink, Topology
from tests.conftest import fixture_path

CONF = Path(__file__).parents[2] / "gpulane" / "conf" / "model"
H200 = GpuSpec("H200", hbm_gbps=4000.0, tflops=700.0, memory_gib=140.4)
H100 = GpuSpec("H100", hbm_gbps=2850.0, tflops=690.0, memory_gib=79.6)
PROJ = Projection({"nvlink": 0.72, "pcie": 0.80}, {"nvlink": 6.0, "pcie": 10.0})


def model(name: str) -> ModelShape:
    import yaml

    return shape_from_config(yaml.safe_load((CONF / f"{name}.yaml").read_text()))


def small() -> ModelShape:
    return ModelShape(name="small", hidden_size=1024, num_layers=4, num_heads=8,
                      num_kv_heads=8, head_dim=128, intermediate_size=4096,
                      vocab_size=1024)  # fmt: skip


def flat_curve_rows(t_us: float, ops: tuple[str, ...] = ("all_reduce", "all_gather")) -> list[Row]:
    """A build whose collectives take ``t_us`` at every size (2 ranks)."""
    return [
        Row(run_id="flat", kind="collective", backend="nccl", op=op, build="flat",
            world_size=2, dtype="bfloat16", size_bytes=s, time_us=t_us, graph=True)
        for op in ops
        for s in (8, 1 << 30)
    ]  # fmt: skip


@dataclass(frozen=True)
class FixedCompute(Compute):
    """Compute that takes a fixed time per stage, whatever the split: for hand arithmetic."""

    dec: float = 1.0
    pre: float = 5.0

    def decode_ms(self, *args: Any) -> float:
        return self.dec

    def prefill_ms(self, *args: Any) -> float:
        return self.pre


def no_topology(n: int) -> Topology:
    return synthetic_topology(n, "H200")


def h200_rows() -> list[Row]:
    return list(read_rows(fixture_path("advise/nvlink-rows.jsonl")))


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


def all_pairs(n: int) -> set[tuple[int, int]]:
    return {(a, b) for a in range(n) for b in range(a + 1, n)}


def advise_on(
    topo: Topology, batches: list[int], input_len: int, output_len: int
) -> dict[str, Recommendation]:
    """70B on the 4 GPUs of ``topo``, projected from its paths alone."""
    shape = model("llama3-70b")
    comms = Comms(None, PROJ, projected_only=True)
    preds = []
    for batch in batches:
        wl = Workload(batch, input_len, output_len)
        for tp, pp, why in splits(shape, 4):
            assert why is None
            preds.append(predict(shape, tp, pp, wl, comms, Compute(H200),
                                 place(topo, 4, tp, pp), H200.memory_gib))  # fmt: skip
    return {r.goal: r for r in recommend(preds, batches, "box")}
