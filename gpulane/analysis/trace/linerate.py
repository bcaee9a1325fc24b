"""The PCIe line rate a trace's copies are held against: the one the user gave, or this
machine's, probed from its live topology.

Probing is the only part of the package that looks at the machine, so it is here alone;
it imports the topology lazily because probing loads NVML and reads sysfs, which a
user who gave --line-rate-gbps should not wait for.
"""

from __future__ import annotations

import math

from gpulane.analysis.trace.events import PCIE, Trace
from gpulane.errors import InputError


def line_rate_for(given_gbps: float | None, trace: Trace) -> tuple[float | None, str | None]:
    """(line rate in GB/s, where it came from) for one trace: ``given_gbps`` when given
    (0 means none), else this machine's for the trace's busiest device when the trace came
    from a GPU process; (None, None) when unknown."""
    if given_gbps is not None:
        if not math.isfinite(given_gbps) or given_gbps < 0:
            raise InputError(f"--line-rate-gbps: expected a positive number, got {given_gbps}")
        return (given_gbps, "--line-rate-gbps") if given_gbps > 0 else (None, None)
    if not trace.has_gpu:
        return None, None
    return probe_line_rate(main_device(trace))


def probe_line_rate(device: int = 0) -> tuple[float | None, str | None]:
    """Host<->GPU line rate (GB/s per direction) of this machine's GPU, if it can be probed."""
    try:
        from gpulane.topology.bandwidth import expected_host_gbps
        from gpulane.topology.live import probe_topology
    except ImportError:
        return None, None
    try:
        topo = probe_topology()
        gbps = expected_host_gbps(topo, f"GPU{device}")
    except Exception:
        return None, None
    if gbps is None:
        return None, None
    try:
        value = float(gbps)
    except (TypeError, ValueError):
        return None, None
    if not math.isfinite(value) or value <= 0:
        return None, None
    return value, f"this machine's topology (GPU{device})"


def main_device(trace: Trace) -> int:
    """The device that moved the most PCIe bytes (0 when unknown)."""
    per: dict[int, int] = {}
    for c in trace.copies:
        if c.link == PCIE and c.device is not None:
            per[c.device] = per.get(c.device, 0) + (c.bytes or 0)
    return max(per, key=lambda d: per[d]) if per else 0
