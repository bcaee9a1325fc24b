"""Checks over the topology: PCIe links at their maximum, P2P status between GPUs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulane.analysis.rules.model import FAIL, PASS, SKIP, Check, Context
from gpulane.analysis.rules.select import values
from gpulane.topology.model import PcieLink, Topology
from gpulane.units import PCIE_LANE_GBPS, pcie_gbps


def _topology(ctx: Context) -> Topology:
    assert ctx.topology is not None  # the evaluator skips these checks without one
    return ctx.topology


def link_downtrained(link: PcieLink) -> bool:
    """Below its maximum generation or width now, or marked downtrained by its source."""
    down = link.downtrained is True
    if link.gen is not None and link.gen_max is not None and link.gen < link.gen_max:
        down = True
    if link.width is not None and link.width_max is not None and link.width < link.width_max:
        down = True
    return down


def _shortfall(link: PcieLink) -> float | None:
    """The line rate now as a share of the link's maximum, minus 1."""
    if not (link.gen and link.gen_max and link.width and link.width_max):
        return None
    if link.gen not in PCIE_LANE_GBPS or link.gen_max not in PCIE_LANE_GBPS:
        return None
    return pcie_gbps(link.gen, link.width) / pcie_gbps(link.gen_max, link.width_max) - 1


def check_pcie_link(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    """Every PCIe link (each GPU's, and the bridges above it with ``include_upstream``)
    at its maximum generation and width."""
    topo = _topology(ctx)
    out: list[Check] = []
    devices: list[tuple[str, PcieLink | None]] = []
    unread = {g.name: g.unreadable for g in topo.gpus if g.unreadable}
    for g in topo.gpus:
        devices.append((g.name, g.pcie))
        if rule.get("include_upstream", True):
            for up in g.upstream:
                devices.append((f"{g.name} upstream {up.bus_id or up.device or ''}".strip(), up))
    for name, link in devices:
        if link is None:
            why = unread.get(name)  # a GPU NVML could not open: not read, so not judged
            said = f"PCIe link not read ({why})" if why else "PCIe link unknown"
            out.append(Check(rule_id, SKIP, "topology", name, said))
            continue
        known = (link.gen is not None and link.gen_max is not None) or (
            link.width is not None and link.width_max is not None
        )
        if link_downtrained(link):
            out.append(
                Check(
                    rule_id,
                    FAIL,
                    "topology",
                    name,
                    f"PCIe link at {link.describe()}, capable of {link.describe_max()} "
                    "(downtrained)",
                    margin=_shortfall(link),
                )
            )
        elif not known:
            out.append(Check(rule_id, SKIP, "topology", name, "PCIe generation and width unknown"))
        else:
            out.append(
                Check(
                    rule_id, PASS, "topology", name, f"PCIe link at {link.describe()} (its maximum)"
                )
            )
    if not out:
        out.append(Check(rule_id, SKIP, "topology", "-", "no GPUs in the topology"))
    return out


def check_p2p_status(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    """Every GPU pair's P2P status OK in the modes the rule names (all modes by default)."""
    topo = _topology(ctx)
    modes = values(rule["modes"]) if rule.get("modes") else None
    pairs = topo.gpu_pairs()
    if not pairs:
        return [Check(rule_id, SKIP, "topology", "-", "no GPU pairs in the topology")]
    out = []
    for p in pairs:
        subject = f"{p.a}-{p.b}"
        if not p.p2p:
            out.append(
                Check(
                    rule_id,
                    SKIP,
                    "topology",
                    subject,
                    "P2P status unknown (needs nvidia-smi topo -p2p or NVML)",
                )
            )
            continue
        items = {k: v for k, v in p.p2p.items() if modes is None or k in modes}
        bad = {k: v for k, v in items.items() if v.upper() != "OK"}
        if not items:
            out.append(
                Check(
                    rule_id,
                    SKIP,
                    "topology",
                    subject,
                    f"P2P status for mode(s) {', '.join(modes or [])} unknown",
                )
            )
        elif bad:
            out.append(
                Check(
                    rule_id,
                    FAIL,
                    "topology",
                    subject,
                    "P2P not OK: " + ", ".join(f"{k}={v}" for k, v in sorted(bad.items())),
                )
            )
        else:
            out.append(
                Check(
                    rule_id, PASS, "topology", subject, "P2P OK (" + ", ".join(sorted(items)) + ")"
                )
            )
    return out
