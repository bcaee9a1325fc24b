"""The fabric picture: a node x node matrix of what the pairs between nodes reached.

A pairs (or ring) campaign measures an all-reduce between two nodes per job; each job's
bus bandwidth at the largest size is one cell of a symmetric node x node matrix. The
campaign writes it to ``fabric.json`` in its group directory (:func:`write_fabric`);
:func:`heatmap` draws it (matplotlib, SVG or PNG) with the outlier pairs outlined, failed
or skipped pairs crossed, and suspect or lost nodes marked on the axes; and
:func:`fabric_section` returns the HTML for a report (None when the directory holds no
fabric.json).
"""

from __future__ import annotations

import html
import io
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpulane.units import format_size

FABRIC_FILE = "fabric.json"
FABRIC_SVG = "fabric.svg"


@dataclass
class PairCell:
    a: str
    b: str
    busbw_gbps: float | None  # None: no figure (failed, skipped, or no rows)
    state: str = "COMPLETED"  # the job's end, or SKIPPED
    job_id: str = "-"
    outlier: str | None = None  # the outlier check's words when it named this pair
    failure: str | None = None


@dataclass
class Fabric:
    nodes: list[str]
    pairs: list[PairCell]
    metric: str = "all_reduce busbw at the largest size"
    size_bytes: int | None = None
    pattern: str = "pairs"
    outlier_fraction: float | None = None
    suspects: dict[str, int] = field(default_factory=dict)  # node -> its bad pairs
    lost: dict[str, str] = field(default_factory=dict)  # node -> why

    def matrix(self) -> list[list[float | None]]:
        """Symmetric, in node order; None on the diagonal and where no pair ran."""
        index = {n: i for i, n in enumerate(self.nodes)}
        m: list[list[float | None]] = [[None] * len(self.nodes) for _ in self.nodes]
        for p in self.pairs:
            if p.a in index and p.b in index:
                m[index[p.a]][index[p.b]] = m[index[p.b]][index[p.a]] = p.busbw_gbps
        return m

    def median(self) -> float | None:
        values = sorted(p.busbw_gbps for p in self.pairs if p.busbw_gbps is not None)
        if not values:
            return None
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "metric": self.metric,
            "unit": "GB/s",
            "size_bytes": self.size_bytes,
            "pattern": self.pattern,
            "outlier_fraction": self.outlier_fraction,
            "median_gbps": self.median(),
            "matrix": self.matrix(),
            "pairs": [asdict(p) for p in self.pairs],
            "suspects": self.suspects,
            "lost": self.lost,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fabric:
        return cls(
            nodes=[str(n) for n in data["nodes"]],
            pairs=[PairCell(**p) for p in data.get("pairs", [])],
            metric=str(data.get("metric") or "busbw"),
            size_bytes=data.get("size_bytes"),
            pattern=str(data.get("pattern") or "pairs"),
            outlier_fraction=data.get("outlier_fraction"),
            suspects={str(k): int(v) for k, v in (data.get("suspects") or {}).items()},
            lost={str(k): str(v) for k, v in (data.get("lost") or {}).items()},
        )


def write_fabric(group: Path, fabric: Fabric, picture: bool = True) -> Path:
    """``fabric.json`` (and the heatmap as ``fabric.svg``) in ``group``."""
    path = group / FABRIC_FILE
    path.write_text(json.dumps(fabric.to_json(), indent=1) + "\n", encoding="utf-8")
    if picture and len(fabric.nodes) >= 2:
        (group / FABRIC_SVG).write_bytes(heatmap(fabric, "svg"))
    return path


def read_fabric(path: Path) -> Fabric:
    return Fabric.from_json(json.loads(path.read_text(encoding="utf-8")))


def find_fabrics(group: Path) -> list[Path]:
    """Every fabric.json in ``group`` or below (a campaign, or an accept group holding one)."""
    if group.is_file():
        return [group] if group.name == FABRIC_FILE else []
    return sorted(group.rglob(FABRIC_FILE))


def heatmap(fabric: Fabric, fmt: str = "svg") -> bytes:
    """The matrix as a heatmap (``svg`` or ``png``): outlier pairs outlined in red, pairs
    without a figure crossed, suspect nodes' names in red, lost nodes' names struck."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle

    n = len(fabric.nodes)
    values = np.array(
        [[math.nan if v is None else v for v in row] for row in fabric.matrix()], dtype=float
    )
    side = min(max(4.0, 0.45 * n + 2.5), 16.0)
    fig, ax = plt.subplots(figsize=(side + 1.2, side))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#e6e6e6")
    finite = values[np.isfinite(values)]
    vmax = float(finite.max()) if finite.size else 1.0
    im = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=0.0, vmax=vmax or 1.0)
    index = {node: i for i, node in enumerate(fabric.nodes)}
    for p in fabric.pairs:
        if p.a not in index or p.b not in index:
            continue
        i, j = index[p.a], index[p.b]
        for r, c in ((i, j), (j, i)):
            if p.outlier:
                ax.add_patch(
                    Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5)
                )
            if p.busbw_gbps is None and p.state != "COMPLETED":
                ax.plot([c - 0.35, c + 0.35], [r - 0.35, r + 0.35], color="black", lw=1)
                ax.plot([c - 0.35, c + 0.35], [r + 0.35, r - 0.35], color="black", lw=1)
            elif p.busbw_gbps is not None and n <= 16:
                light = p.busbw_gbps < 0.55 * (vmax or 1.0)
                ax.text(
                    c,
                    r,
                    f"{p.busbw_gbps:.3g}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if light else "black",
                )
    labels = [f"{node} (lost)" if node in fabric.lost else node for node in fabric.nodes]
    step = max(1, n // 48)  # at most ~48 names on an axis
    ticks = list(range(0, n, step))
    ax.set_xticks(ticks, [labels[t] for t in ticks], rotation=90, fontsize=8)
    ax.set_yticks(ticks, [labels[t] for t in ticks], fontsize=8)
    for axis_labels in (ax.get_xticklabels(), ax.get_yticklabels()):
        for t, label in zip(ticks, axis_labels, strict=False):
            node = fabric.nodes[t]
            if node in fabric.suspects or node in fabric.lost:
                label.set_color("red")
                label.set_fontweight("bold")
    size = f" {format_size(int(fabric.size_bytes))}" if fabric.size_bytes else ""
    ax.set_title(f"{fabric.pattern}: all_reduce{size} busbw between nodes (GB/s)", fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="GB/s")
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, bbox_inches="tight", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def fabric_section(group_dir: str | Path) -> str | None:
    """HTML for a report: each fabric.json under ``group_dir`` as a heatmap (inline SVG)
    with the pairs and nodes it names; None when there is none."""
    paths = find_fabrics(Path(group_dir))
    if not paths:
        return None
    parts = ['<section class="fabric"><h2>Fabric: node &times; node</h2>']
    for path in paths:
        fabric = read_fabric(path)
        svg = heatmap(fabric, "svg").decode("utf-8")
        svg = svg[svg.find("<svg") :]  # inline: no XML prolog or DOCTYPE
        median = fabric.median()
        words = [
            f"{len(fabric.nodes)} nodes, {len(fabric.pairs)} pairs ({html.escape(fabric.pattern)})",
            f"median {median:.4g} GB/s" if median is not None else "no figures",
        ]
        if fabric.outlier_fraction is not None:
            words.append(f"outlier: more than {fabric.outlier_fraction:.0%} below the median")
        parts.append(f"<p>{html.escape(str(path.parent))}: {'; '.join(words)}</p>")
        parts.append(f'<div class="heatmap">{svg}</div>')
        named = [p for p in fabric.pairs if p.outlier or p.failure]
        items = []
        for p in named:
            what = p.outlier or p.failure or ""
            items.append(f"<li>{html.escape(p.a)}+{html.escape(p.b)}: {html.escape(what)}</li>")
        for node, bad in sorted(fabric.suspects.items()):
            items.append(
                f"<li>node {html.escape(node)}: all {bad} of its pairs are slow or failed</li>"
            )
        for node, why in sorted(fabric.lost.items()):
            items.append(f"<li>node {html.escape(node)} lost: {html.escape(why)}</li>")
        if items:
            parts.append("<ul>" + "".join(items) + "</ul>")
    parts.append("</section>")
    return "\n".join(parts)
