"""Synthetic rows of 1..8 GPUs as gpulane's own commands write them: host copies one GPU at
a time (solo), every GPU at once (each GPU's share, and their sum made by the copy's own
``aggregate_row``), peer copies and NCCL collectives; and the topology they ran on."""

from __future__ import annotations

import copy
from typing import Any

from gpulane.record import Row
from gpulane.topology.bandwidth import LineRate
from gpulane.transfers.points import aggregate_row
from tests.analysis.fixture_rows import h200_topology

GIB = 1 << 30
GEN5_X16 = 63.008  # GB/s per direction (units.pcie_gbps(5, 16))
SIZES = (1 << 26, 1 << 28, GIB)


def topology(n: int, label: str = "NV18") -> dict[str, Any]:
    """``n`` H200s on Gen5 x16 each, every pair joined by ``label`` (NV18, PIX, SYS...)."""
    topo = h200_topology()
    base = topo["gpus"][0]
    topo["gpus"] = [
        {**copy.deepcopy(base), "name": f"GPU{i}", "index": i, "bus_id": f"{i:04x}:00:00.0"}
        for i in range(n)
    ]
    nv = int(label[2:]) if label.startswith("NV") else None
    topo["pairs"] = [
        {
            "a": f"GPU{i}",
            "b": f"GPU{j}",
            "label": label,
            "kind": "nvlink" if nv else label.lower(),
            "nvlinks": nv,
            "p2p": {"r": "OK"},
        }
        for i in range(n)
        for j in range(i + 1, n)
    ]
    return topo


def _copy(op: str, gpu: str, gbps: float, size: int, **kw: Any) -> Row:
    base: dict[str, Any] = {"build": "h200", "host": "vm", "world_size": 1}
    return Row(
        run_id=kw.pop("run_id", "copy-1"), kind="copy", backend="cuda", op=op,
        memory=kw.pop("memory", "pinned"), bidirectional=False,
        src="host" if op == "h2d" else gpu, dst=gpu if op == "h2d" else "host",
        size_bytes=size, time_us=size / (gbps * 1e3), algbw_gbps=gbps, busbw_gbps=gbps,
        expected_gbps=GEN5_X16, efficiency=gbps / GEN5_X16, wrong=0, **{**base, **kw},
    )  # fmt: skip


def host_copies(
    n: int,
    *,
    solo: float = 55.4,
    at_once: dict[str, float | list[float]] | None = None,
    gpu_solo: dict[str, float] | None = None,
    repeats: int = 1,
    **kw: Any,
) -> list[Row]:
    """Pinned h2d and d2h, solo per GPU at three sizes (``gpu_solo`` overrides a GPU's
    1 GiB figure), then (2+ GPUs) all GPUs at once at 1 GiB: each GPU's share
    (``at_once`` per direction, one figure or one per GPU; default 41 H2D / 33 D2H, the
    4x H200 of issue 28) and
    their sum. ``repeats``: each solo figure measured that many times."""
    shares: dict[str, float | list[float]] = {"h2d": 41.0, "d2h": 33.0, **(at_once or {})}
    rows: list[Row] = []
    for op in ("h2d", "d2h"):
        for i in range(n):
            gpu = f"GPU{i}"
            for k, size in enumerate(SIZES):
                top = (gpu_solo or {}).get(gpu, solo) if size == GIB else solo
                value = top * (0.9 + 0.1 * (k + 1) / len(SIZES)) if size != GIB else top
                for _ in range(repeats):
                    rows.append(_copy(op, gpu, value, size, **kw))
        if n > 1:
            together = [
                _copy(
                    op,
                    f"GPU{i}",
                    share[i] if isinstance(share := shares[op], list) else share,
                    GIB,
                    world_size=n,
                    extra={"test": "all-gpus", "concurrent": n},
                    **kw,
                )
                for i in range(n)
            ]
            rows += together
            rows.append(aggregate_row(together, LineRate(GEN5_X16 * n, "sum", "sum"), "all-gpus"))
    return rows


def peer_copies(n: int, gbps: float = 390.0, path: str = "NV18", **kw: Any) -> list[Row]:
    base: dict[str, Any] = {"build": "h200", "host": "vm"}
    return [
        Row(
            run_id="copy-1",
            kind="copy",
            backend="cuda",
            op="p2p",
            memory="device",
            bidirectional=False,
            peer_access=True,
            src=f"GPU{i}",
            dst=f"GPU{j}",
            size_bytes=GIB,
            time_us=GIB / (gbps * 1e3),
            algbw_gbps=gbps,
            busbw_gbps=gbps,
            world_size=2,
            path=path,
            **{**base, **kw},
        )
        for i in range(n)
        for j in range(n)
        if i != j
    ]


def collectives(
    world: int, busbw: dict[str, float] | None = None, path: str = "NV18", **kw: Any
) -> list[Row]:
    """all_reduce and all_gather at 64 KiB, 64 MiB and 1 GiB on ``world`` GPUs."""
    figures = {"all_reduce": 330.0, "all_gather": 270.0, **(busbw or {})}
    base: dict[str, Any] = {"build": "h200", "host": "vm", "nodes": 1}
    rows = []
    for op, top in figures.items():
        for size, share in ((1 << 16, 0.01), (1 << 26, 0.6), (GIB, 1.0)):
            bw = top * share
            rows.append(
                Row(
                    run_id="sweep-1",
                    kind="collective",
                    backend="torch-nccl",
                    op=op,
                    dtype="float",
                    world_size=world,
                    size_bytes=size,
                    time_us=size / (bw * 1e3),
                    algbw_gbps=bw,
                    busbw_gbps=bw,
                    wrong=0,
                    path=path if world > 1 else None,
                    **{**base, **kw},
                )
            )
    return rows


def machine(n: int, **kw: Any) -> list[Row]:
    """A healthy n-GPU H200 machine's suite: collectives (2+ GPUs), host and peer copies."""
    rows = host_copies(n, **kw)
    if n > 1:
        rows += collectives(n) + peer_copies(n)
    return rows
