"""A row's path label and the line rate it is held to, from the topology model.

The label and the rate come from gpulane.topology (``paths.path_label``,
``bandwidth.host_rate`` / ``pair_rate`` / ``path_rate``); this module only says which GPUs
a row is about and, when there is no figure, why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpulane.record import Row
from gpulane.topology.bandwidth import PCIE_PATHS, host_rate, pair_rate, path_rate
from gpulane.topology.model import Topology
from gpulane.topology.paths import nvlink_count, path_label


def row_path(row: Row, topology: Topology | None) -> str | None:
    """The row's own ``path``; else, from the topology, the worst path among all GPUs (a
    collective) or the pair's label (a peer copy)."""
    path = row.path
    if isinstance(path, str) and path:
        return path
    if topology is None:
        return None
    if row.kind == "collective":
        return path_label(topology, topology.gpu_names())
    if row.kind == "copy" and row.op == "p2p":
        return path_label(topology, [str(row.src), str(row.dst)])
    return None


def expected_gbps(row: Row, topology: Topology | None) -> tuple[float | None, str]:
    """The line rate the row's path should reach, and where that figure came from."""
    given = row.expected_gbps
    if isinstance(given, (int, float)) and not math.isnan(given) and given > 0:
        return float(given), "expected_gbps of the row"
    kind, op = row.kind, row.op
    raw_extra = row.extra
    extra: Mapping[str, Any] = raw_extra if isinstance(raw_extra, Mapping) else {}
    if kind == "copy" and op in ("h2d", "d2h") and isinstance(extra.get("gpus"), list):
        # all GPUs at once: what the GPUs' own links could take together
        links = [
            host_rate(topology, str(g)) if topology is not None else None for g in extra["gpus"]
        ]
        if links and all(link is not None for link in links):
            total = sum(link.gbps for link in links if link is not None)
            return total, f"sum of {len(links)} host links"
        return None, "PCIe links of the GPUs copying at once not in the topology"
    if kind == "copy" and op in ("h2d", "d2h"):
        gpu_name = row.dst if op == "h2d" else row.src
        rate = host_rate(topology, str(gpu_name)) if topology is not None else None
        if rate is not None:
            return rate.gbps, rate.label
        return None, f"no PCIe link of {gpu_name} in the topology"
    label = row_path(row, topology)
    if label is None:
        return None, "path unknown"
    if topology is not None and kind == "copy" and row.peer_access is False:
        staged = pair_rate(topology, str(row.src), str(row.dst), False)
        if staged is not None:
            return staged.gbps, staged.label
        return None, "staged copy: PCIe links of the GPUs not in the topology"
    gpus = [str(row.src), str(row.dst)] if kind == "copy" else None
    if topology is not None and gpus is None:
        gpus = topology.gpu_names()
    rate = path_rate(topology, gpus or [], label)
    n = nvlink_count(label)
    if rate is not None:
        if n is not None:
            return rate.gbps, f"{label}: {n} x {rate.gbps / n:.2f} GB/s"
        return rate.gbps, f"{label}: slowest PCIe link of the GPUs, {rate.label}"
    if n is not None:
        return None, f"{label}: per-link NVLink rate unknown (no link speeds or GPU model)"
    if label in (*PCIE_PATHS, "SOC"):
        return None, f"{label}: PCIe links of the GPUs not in the topology"
    return None, f"no line rate for path {label}"
