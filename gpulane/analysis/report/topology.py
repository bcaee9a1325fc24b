"""The topology on a page: the GPU/NIC matrix with nvidia-smi's labels, each GPU's PCIe
link (now and at most), P2P status, warnings; and, per build on the compare page, what
NCCL actually used between the ranks (the rows' ``transport``) and the NCCL settings
that steered it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpulane.analysis.report.html import e, section, table
from gpulane.analysis.report.summary import transport_of, values_text
from gpulane.analysis.store import find_topology, load_topology
from gpulane.topology.model import Topology, as_topology


@dataclass
class BuildTopology:
    """One side of a comparison: its label, rows and topology (None: none found)."""

    label: str
    rows: pd.DataFrame
    topology: Topology | None
    source: str | None


def build_topologies(sides: Sequence[tuple[str, pd.DataFrame]]) -> list[BuildTopology]:
    """Each side with the topology.json found beside (or above) its run directories."""
    out = []
    for label, rows in sides:
        dirs = sorted({str(d) for d in rows["run_dir"].dropna() if str(d)}) if len(rows) else []
        found = find_topology(dirs)
        topo = load_topology(found) if found is not None else None
        out.append(BuildTopology(label, rows, topo, str(found) if found else None))
    return out


def _cell_class(label: str) -> str:
    if label == "X":
        return "self"
    if label.startswith("NV"):
        return "nv"
    if label in ("PIX", "PXB", "PHB"):
        return "pcie"
    return "sys"


def matrix(topo: Topology, table_id: str) -> str:
    names = topo.gpu_names() + [n.name for n in topo.nics]
    head = "".join(f"<th>{e(n)}</th>" for n in names)
    body = []
    for a in names:
        cells = []
        for b in names:
            pair = topo.pair(a, b)
            label = "X" if a == b else (pair.label if pair is not None else "")
            cells.append(f'<td class="{_cell_class(label) if label else ""}">{e(label)}</td>')
        body.append(f'<tr><th class="l">{e(a)}</th>{"".join(cells)}</tr>')
    return (
        f'<div class="scroll"><table id="{e(table_id)}"><thead><tr><th></th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else "-"


def gpu_table(topo: Topology, table_id: str, compact: bool = False) -> str:
    """Each GPU's model, place and PCIe link; ``compact`` (a build's card) leaves out the
    bus id and CPU affinity."""
    rows = []
    for g in topo.gpus:
        link = g.pcie
        rows.append(
            {
                "GPU": g.name,
                "model": g.model or "-",
                "bus id": g.bus_id or "-",
                "NUMA": "-" if g.numa is None else g.numa,
                "CPU affinity": g.cpu_affinity or "-",
                "PCIe now": link.describe() if link else "-",
                "PCIe max": link.describe_max() if link else "-",
                "downtrained": _yes_no(link.downtrained) if link else "-",
            }
        )
    if not rows:
        return ""
    frame = pd.DataFrame(rows)
    if compact:
        frame = frame.drop(columns=["bus id", "CPU affinity"])
    return table(frame, table_id, left=["GPU", "model", "bus id", "CPU affinity"])


def p2p_table(topo: Topology, table_id: str) -> str:
    rows = [
        {
            "pair": f"{p.a}-{p.b}",
            "label": p.label,
            "P2P": ", ".join(f"{k}={v}" for k, v in sorted(p.p2p.items())),
        }
        for p in topo.pairs
        if p.p2p
    ]
    return table(pd.DataFrame(rows), table_id, left=["pair", "label", "P2P"]) if rows else ""


def warnings_list(topo: Topology, element_id: str) -> str:
    if not topo.warnings:
        return f'<p id="{e(element_id)}">No topology warnings.</p>'
    items = "".join(f"<li>{e(w)}</li>" for w in topo.warnings)
    return f'<ul class="warn" id="{e(element_id)}">{items}</ul>'


def topology_section(
    topology: Topology | Mapping[str, Any] | None, source: str | None = None
) -> str:
    """The run report's topology section (element ids ``topology-*``)."""
    topo = as_topology(topology)
    if topo is None:
        body = "<p>No topology recorded (gpulane topo --json; report --topology FILE).</p>"
        return section("topology", "Topology", body)
    src = f'<p class="meta">from {e(source)}</p>' if source else ""
    body = (
        src
        + matrix(topo, "topology-matrix")
        + gpu_table(topo, "topology-gpus")
        + p2p_table(topo, "topology-p2p")
        + warnings_list(topo, "topology-warnings")
    )
    return section("topology", "Topology", body)


def nccl_settings(rows: pd.DataFrame) -> str:
    """NCCL_* settings of the collective rows (the preset that steered NCCL), or '-'."""
    seen: dict[str, list[str]] = {}
    for env in rows.get("env", pd.Series(dtype=object)):
        for k, v in (env or {}).items():
            if str(k).startswith("NCCL_") and k not in ("NCCL_VERSION",):
                seen.setdefault(str(k), []).append(str(v))
    return " ".join(f"{k}={values_text(v, 2)}" for k, v in sorted(seen.items())) or "defaults"


def build_card(side: BuildTopology, index: int) -> str:
    coll = side.rows[side.rows["kind"] == "collective"]
    transport = transport_of(coll) if len(coll) else "unknown (no collective rows)"
    facts = [
        ("NCCL transport", transport),
        ("NCCL settings", nccl_settings(coll) if len(coll) else "-"),
        ("path label of the rows", values_text(coll["path"]) if len(coll) else "-"),
    ]
    if transport == "unknown":
        facts[0] = (
            "NCCL transport",
            "unknown: the rows do not say (the path label is what the topology offers)",
        )
    head = f'<h3 id="topology-{index}">{e(side.label)}</h3>'
    info = table(
        pd.DataFrame(facts, columns=["", "value"]), f"transport-{index}", left=[""], wrap=["value"]
    )
    topo = side.topology
    if topo is None:
        return f'<div class="card">{head}{info}<p>No topology found beside these rows.</p></div>'
    src = f'<p class="meta">from {e(side.source)}</p>' if side.source else ""
    body = (
        matrix(topo, f"topology-matrix-{index}")
        + gpu_table(topo, f"topology-gpus-{index}", compact=True)
        + warnings_list(topo, f"topology-warnings-{index}")
    )
    return f'<div class="card">{head}{info}{body}{src}</div>'


def builds_topology_section(sides: Sequence[BuildTopology]) -> str:
    cards = "".join(build_card(s, i) for i, s in enumerate(sides))
    return section("topology", "Topology of each build", f'<div class="cards">{cards}</div>')
