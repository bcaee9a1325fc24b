"""A campaign's verdict: each element's figures at the largest size, the outliers named by
the acceptance rules' outlier check, the nodes all of whose pairs are bad, summary.json."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from gpulane.analysis.fabric import FABRIC_FILE, FABRIC_SVG, Fabric, PairCell, write_fabric
from gpulane.campaigns.elements import Element
from gpulane.campaigns.settings import PatternSettings
from gpulane.errors import RunFailed, print_error
from gpulane.record import Row, utc_now
from gpulane.session.output import Say, stdout

SUMMARY_FILE = "summary.json"
FIGURE_OP = "all_reduce"  # what judges pairs and halving: its busbw at the largest size
PAIR_PATTERNS = ("pairs", "ring")


def largest_size_figures(rows: list[Row]) -> dict[str, float]:
    """figure label -> busbw (GB/s, median over repeats) for the ok rows at the largest
    size of each collective."""
    from gpulane.analysis.store import figure_label

    ok = [r for r in rows if r.status == "ok" and r.busbw_gbps is not None]
    top: dict[str, int] = {}
    for r in ok:
        top[r.op] = max(top.get(r.op, 0), int(r.size_bytes or 0))
    values: dict[str, list[float]] = {}
    for r in ok:
        if int(r.size_bytes or 0) == top[r.op]:
            values.setdefault(figure_label(r), []).append(float(r.busbw_gbps or 0.0))
    return {k: float(statistics.median(v)) for k, v in values.items()}


def outlier_checks(elements: list[Element], fraction: float) -> list[Any]:
    """The acceptance rules' outlier check over the elements' busbw at the largest size,
    one subject per element (its label stands in for the host)."""
    from gpulane.analysis.rules import evaluate
    from gpulane.analysis.store import load_frame

    dirs = [e.run.path for e in elements if e.run.rows()]
    if len(dirs) < 2:
        return []
    frame = load_frame(dirs)
    # The largest size of each collective, as the summary table shows.
    frame = frame[frame["kind"] == "collective"]
    top = frame.groupby("op")["size_bytes"].transform("max")
    frame = frame[frame["size_bytes"] == top].copy()
    label_of = {str(e.run.path): e.label for e in elements}
    frame["host"] = frame["run_dir"].map(lambda d: label_of.get(str(d), str(d)))
    spec = {
        "outlier_fraction": fraction,
        "checks": {
            "busbw_among_peers": {
                "check": "min",
                "description": "busbw at the largest size within the outlier fraction of "
                "the peers' median",
                "select": {"kind": "collective"},
                "metric": "busbw_gbps",
                "per": "node",
            }
        },
    }
    return [c for c in evaluate(frame, spec).checks if c.basis == "outlier"]


def summarize(
    group: Path,
    pattern: str,
    elements: list[Element],
    ps: PatternSettings,
    lost: dict[str, str] | None = None,
    skipped: list[Any] | None = None,
    say: Say = stdout,
) -> tuple[int, dict[str, Any]]:
    """Say one line per element with its figures; name the outliers, the failures and
    the nodes lost. Returns the exit status and what summary.json keeps."""
    lost = dict(lost or {})
    skipped = list(skipped or [])
    figures = {e.label: largest_size_figures(e.run.rows()) for e in elements}
    columns = sorted({f for fs in figures.values() for f in fs})
    checks = outlier_checks(elements, ps.outlier_fraction)
    named = {c.subject: c for c in checks if c.status == "fail"}
    what = {"per-node": "node", "allocation": "allocation"}.get(pattern, "pair")
    header = [what, "job", "state", *[f"{c} (GB/s)" for c in columns], "verdict"]
    lines = []
    for e in elements:
        verdict = "ok"
        if e.failure:
            verdict = "FAILED"
        elif e.label in named:
            c = named[e.label]
            verdict = (
                f"OUTLIER {c.margin * 100:+.1f}% vs peers" if c.margin is not None else "OUTLIER"
            )
        elif not figures[e.label]:
            verdict = "no rows"
        vals = [f"{figures[e.label][c]:.4g}" if c in figures[e.label] else "-" for c in columns]
        lines.append([e.label, e.job_id, e.state, *vals, verdict])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines, strict=False)]
    say(
        f"# {pattern} summary: busbw at the largest size; outlier: more than "
        f"{ps.outlier_fraction:.0%} below the median of its peers"
    )
    for line in [header, *lines]:
        say("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=False)).rstrip())
    status = 0
    if len(elements) < 2:
        say(f"# one {what}: no peers to compare it with")
    for subject, c in sorted(named.items()):
        say(f"# outlier {what}: {subject}: {c.message}")
        status = RunFailed.exit_code
    for e in elements:
        if e.failure:
            print_error(f"{e.label}: {e.failure}")
            status = RunFailed.exit_code
    suspects: dict[str, int] = {}
    if pattern in PAIR_PATTERNS:
        # A node all of whose pairs are slow or failed is the likely culprit (with 3
        # nodes or more; the one pair of 2 nodes names neither).
        bad = [e for e in elements if e.failure or e.label in named]
        nodes = sorted({n for e in elements for n in e.nodes})
        for n in nodes:
            if n in lost:
                continue  # named as lost below
            mine = [e for e in elements if n in e.nodes]
            hits = sum(1 for e in bad if n in e.nodes)
            if len(nodes) >= 3 and hits and hits == len(mine):
                suspects[n] = hits
                say(f"# node {n}: all {hits} of its pairs are slow or failed{_range(mine)}")
    for s in skipped:
        say(f"# {s.label}: not measured ({s.reason})")
    for node, why in sorted(lost.items()):
        say(f"# lost node: {node}: {why}")
        status = RunFailed.exit_code
    if status == 0 and len(elements) >= 2:
        say(f"# no outlier among {len(elements)} {what}s")
    data = {
        "pattern": pattern,
        "outlier_fraction": ps.outlier_fraction,
        "passed": status == 0,
        "elements": [
            {
                "label": e.label,
                "nodes": e.nodes,
                "job_id": e.job_id,
                "state": e.state,
                "failure": e.failure,
                "run_dir": str(e.run.path),
                "figures": figures[e.label],
                "outlier": named[e.label].message if e.label in named else None,
            }
            for e in elements
        ],
        "suspect_nodes": suspects,
        "lost_nodes": lost,
        "skipped": [{"label": s.label, "nodes": s.nodes, "reason": s.reason} for s in skipped],
    }
    if pattern in PAIR_PATTERNS and elements:
        fabric = pair_fabric(pattern, elements, figures, named, suspects, lost, skipped, ps)
        data["fabric"] = str(write_fabric(group, fabric))
        say(f"# fabric: {group / FABRIC_FILE} (heatmap: {group / FABRIC_SVG})")
    return status, data


def pair_fabric(
    pattern: str,
    elements: list[Element],
    figures: dict[str, dict[str, float]],
    named: dict[str, Any],
    suspects: dict[str, int],
    lost: dict[str, str],
    skipped: list[Any],
    ps: PatternSettings,
) -> Fabric:
    """The node x node matrix of the pair elements' all_reduce busbw at the largest size."""
    cells = []
    size = None
    for e in elements:
        values = {k: v for k, v in figures[e.label].items() if k.startswith(FIGURE_OP + " ")}
        figure = statistics.median(values.values()) if values else None
        if values and size is None:
            size = _size_of(e)
        outlier = named[e.label].message if e.label in named else None
        cells.append(
            PairCell(e.nodes[0], e.nodes[-1], figure, e.state, e.job_id, outlier, e.failure)
        )
    for s in skipped:
        if len(s.nodes) == 2:
            cells.append(PairCell(s.nodes[0], s.nodes[1], None, "SKIPPED", "-", None, s.reason))
    return Fabric(
        nodes=list(ps.nodes),
        pairs=cells,
        size_bytes=size,
        pattern=pattern,
        outlier_fraction=ps.outlier_fraction,
        suspects=suspects,
        lost=lost,
    )


def _size_of(e: Element) -> int | None:
    sizes = [
        int(r.size_bytes)
        for r in e.run.rows()
        if r.op == FIGURE_OP and r.status == "ok" and r.size_bytes
    ]
    return max(sizes) if sizes else None


def _range(elements: list[Element]) -> str:
    """The all_reduce figures of some elements, as evidence: " (0.0101-0.0104 GB/s)"."""
    values = [
        v
        for e in elements
        for k, v in largest_size_figures(e.run.rows()).items()
        if k.startswith(FIGURE_OP + " ")
    ]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    return f" ({lo:.4g} GB/s)" if lo == hi else f" ({lo:.4g}-{hi:.4g} GB/s)"


def write_summary(group: Path, data: dict[str, Any], say: Say = stdout) -> None:
    data = {"written_at": utc_now(), **data}
    (group / SUMMARY_FILE).write_text(json.dumps(data, indent=1, default=str) + "\n")
    say(f"# summary: {group / SUMMARY_FILE}")
