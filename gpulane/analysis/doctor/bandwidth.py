"""Measured bandwidth against the path's line rate, from a run directory's rows."""

from __future__ import annotations

from typing import Any

from gpulane.analysis.doctor.model import Finding, NotRun
from gpulane.analysis.rules.linerate import expected_gbps
from gpulane.record import Row
from gpulane.topology.evidence import Evidence

MIN_BYTES = 64 << 20  # below this, latency and not the path decides the figure
# The share of the line rate below which a measurement is far off, whatever the rules
# say: collectives reach 0.6-0.7 of NVLink and ~0.9 of PCIe when healthy (DESIGN.md).
FAR_BELOW = {"collective": 0.3, "copy": 0.5}


def _largest(rows: list[Row]) -> list[Row]:
    """Per (run, kind, op, endpoints, memory): the row of the largest size, if large."""
    best: dict[tuple[Any, ...], Row] = {}
    for r in rows:
        if r.status != "ok" or (r.size_bytes or 0) < MIN_BYTES:
            continue
        key = (
            r.run_id,
            r.kind,
            r.op,
            r.src,
            r.dst,
            r.memory,
            r.bidirectional,
        )
        if key not in best or (r.size_bytes or 0) > (best[key].size_bytes or 0):
            best[key] = r
    return list(best.values())


def check_bandwidth(ev: Evidence) -> list[Finding]:
    if not ev.rows:
        raise NotRun(ev.absent.get("rows", "no run directory given (--run DIR)"))
    out = []
    judged = 0
    for r in _largest([r for r in ev.rows if r.kind in FAR_BELOW]):
        metric = "busbw_gbps" if r.kind == "collective" else "algbw_gbps"
        value = getattr(r, metric)
        rate, source = expected_gbps(r, ev.topology)
        if not isinstance(value, (int, float)) or rate is None:
            continue
        judged += 1
        share = value / rate
        if share >= FAR_BELOW[str(r.kind)]:
            continue
        what = f"{r.op}" + (f" {r.src}->{r.dst}" if r.kind == "copy" else "")
        transport = f"; NCCL used {r.transport}" if r.transport else ""
        size = f"{(r.size_bytes or 0) / (1 << 20):.0f} MiB"
        out.append(
            Finding(
                "warning",
                "bandwidth",
                f"{what} reached {share:.0%} of the path's rate",
                f"{what} {size}: {metric.split('_')[0]} {value:.1f} GB/s against {rate:.1f} GB/s "
                f"({source}){transport} (run {r.run_id}, build {r.build})",
                "a transfer this far below its path's line rate is held back by something on "
                "the way: the other findings (transport, ACS, IOMMU, links, NUMA) say what",
                "fix what the other findings name and measure again (gpulane sweep / copy); with "
                "none, compare builds with gpulane compare",
                what,
            )
        )
    if not judged:
        raise NotRun("no row of 64 MiB or more with a known line rate (topology needed)")
    return out
