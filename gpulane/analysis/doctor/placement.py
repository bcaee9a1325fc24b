"""Where things sit: ranks against their GPU's NUMA node, GPUs against their nearest NIC."""

from __future__ import annotations

from typing import Any

from gpulane.analysis.doctor.model import Finding, NotRun
from gpulane.topology.evidence import Evidence
from gpulane.topology.model import Gpu
from gpulane.topology.paths import PCIE_LABELS, best_label


def cpu_set(text: str | None) -> set[int]:
    """``0-3,8`` -> {0, 1, 2, 3, 8}; empty for None or anything unreadable."""
    out: set[int] = set()
    for part in (text or "").replace(" ", "").split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            a, b = int(lo), int(hi or lo)
            if b - a < 1 << 16:
                out.update(range(a, b + 1))
    return out


def _rank_gpu(fact: dict[str, Any], gpus: list[Gpu]) -> Gpu | None:
    device = str(fact.get("device") or "")
    if not device.startswith("cuda"):
        return None
    index = int(device.split(":")[1]) if ":" in device and device.split(":")[1].isdigit() else 0
    visible = [
        v.strip() for v in str(fact.get("cuda_visible_devices") or "").split(",") if v.strip()
    ]
    if visible and index < len(visible) and visible[index].isdigit():
        index = int(visible[index])
    return next((g for g in gpus if g.index == index), None)


def check_numa(ev: Evidence) -> list[Finding]:
    topo = ev.topology
    if topo is None or not any(g.cpu_affinity for g in topo.gpus):
        raise NotRun("the GPUs' CPU affinity is unknown (needs the live probe or topo -m)")
    if not ev.preflight:
        raise NotRun("where the ranks ran is unknown (give --run DIR of a sweep: preflight.json)")
    out = []
    unpinned = []
    for fact in ev.preflight:
        gpu = _rank_gpu(fact, topo.gpus)
        allowed = cpu_set(fact.get("cpus"))
        if gpu is None or not allowed or not gpu.cpu_affinity:
            continue
        local = cpu_set(gpu.cpu_affinity)
        if local and not allowed & local:
            numa = f" (NUMA node {gpu.numa})" if gpu.numa is not None else ""
            out.append(
                Finding(
                    "warning",
                    "numa",
                    f"rank {fact.get('rank')} ran on CPUs far from {gpu.name}",
                    f"rank {fact.get('rank')} on {fact.get('host')}: CPUs {fact.get('cpus')}; "
                    f"{gpu.name} is local to CPUs {gpu.cpu_affinity}{numa}",
                    "host buffers, NCCL's proxy thread and copies of this rank cross the CPU "
                    "interconnect to reach the GPU: host-device bandwidth drops and latency grows",
                    "bind each rank to its GPU's NUMA node: `--bind-to numa`/`--map-by` (mpirun), "
                    "`--cpu-bind=...` or gres binding (Slurm), numactl, or leave it unpinned",
                    f"rank {fact.get('rank')}",
                )
            )
        elif local and not allowed <= local:
            unpinned.append(str(fact.get("rank")))
    if unpinned:
        out.append(
            Finding(
                "info",
                "numa",
                f"ranks {', '.join(unpinned[:8])} were not pinned to their GPU's NUMA node",
                f"their allowed CPUs span more than the GPU's local ones (preflight.json of {ev.run_dir})",
                "the scheduler may run them on the far socket; NCCL pins its own threads to the "
                "GPU's CPUs, but the rank's host buffers follow where it first touched them",
                "bind ranks to their GPU's NUMA node when host-side work or copies matter",
            )
        )
    return out


def check_nic_numa(ev: Evidence) -> list[Finding]:
    topo = ev.topology
    if topo is None or not topo.nics:
        raise NotRun("no NIC in the topology (single node, or topo -m without NIC columns)")
    nics = {n.name for n in topo.nics}
    out = []
    for g in topo.gpus:
        labels = [
            p.label
            for p in topo.pairs
            if p.label in PCIE_LABELS and g.name in (p.a, p.b) and {p.a, p.b} & nics
        ]
        if not labels:
            continue
        best = best_label(labels)
        if best in ("NODE", "SYS"):
            out.append(
                Finding(
                    "warning" if best == "SYS" else "info",
                    "nic_numa",
                    f"{g.name}'s nearest NIC is {best} from it",
                    f"{g.name}: best GPU-NIC path {best} (topo -m)",
                    "traffic between this GPU and the network crosses the host bridge"
                    + (" and the CPU interconnect" if best == "SYS" else "")
                    + "; NCCL's default GPUDirect RDMA level (PXB) does not reach it, so data is "
                    "staged through host memory",
                    "put a NIC behind the same PCIe switch as each GPU (rail-optimized), or pick "
                    "the GPU's closest NIC with NCCL_IB_HCA; NCCL_NET_GDR_LEVEL=SYS only if the "
                    "platform routes peer traffic well",
                    g.name,
                )
            )
    return out
