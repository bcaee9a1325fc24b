"""`gpulane report` and `gpulane accept`'s page: one run or a hundred, self-contained.

Order: acceptance (when the rows were checked: verdict, current against baseline, the
rules, the doctor's findings), summary (time range, runs by build and kind), collectives,
copies, token rates, topology, errors. Lines are told apart by build; every plot has its
table in a collapsed box beneath it.

Element ids a reader (or a test) can rely on: ``summary``, ``runs-by-build``, ``verdict``,
``checks``, ``findings``, ``collectives``, ``copies``, ``tokens``, ``topology``,
``topology-matrix``, ``topology-gpus``, ``topology-warnings``, ``table-copy``,
``table-tokens``, ``table-collective-N``, ``table-errors``, and ``plot-<name>`` per plot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gpulane.analysis.compare.machines import series_labels
from gpulane.analysis.fabric import fabric_section
from gpulane.analysis.plots import colours
from gpulane.analysis.report.checks import acceptance_section
from gpulane.analysis.report.html import draw_held, figures_at_once, page
from gpulane.analysis.report.sections import (
    collectives_section,
    copies_section,
    errors_section,
    tokens_section,
)
from gpulane.analysis.report.summary import summary_section
from gpulane.analysis.report.topology import topology_section
from gpulane.analysis.rules import Verdict
from gpulane.topology.model import Topology, as_topology


def render_report(
    frame: pd.DataFrame,
    topology: Topology | Mapping[str, Any] | None = None,
    verdict: Verdict | None = None,
    title: str = "gpulane report",
    sources: Sequence[str] = (),
    topology_source: str | None = None,
    rule_set: str | None = None,
    baseline: pd.DataFrame | None = None,
    findings: Sequence[Mapping[str, Any]] | None = None,
    baseline_source: str | None = None,
    history: str | None = None,
) -> str:
    """The whole report as one HTML string (its plots drawn at once, at the end)."""
    with figures_at_once() as held:
        text = _render(
            frame, topology, verdict, title, sources, topology_source, rule_set, baseline,
            findings, baseline_source, history,
        )  # fmt: skip
    return draw_held(text, held)


def _render(
    frame: pd.DataFrame,
    topology: Topology | Mapping[str, Any] | None,
    verdict: Verdict | None,
    title: str,
    sources: Sequence[str],
    topology_source: str | None,
    rule_set: str | None,
    baseline: pd.DataFrame | None,
    findings: Sequence[Mapping[str, Any]] | None,
    baseline_source: str | None,
    history: str | None,
) -> str:
    topo = as_topology(topology)
    series = "build"
    # A build whose rows come from different machines (GPU model, host, backend) is drawn
    # and tabled as one series per machine, never as their mean.
    shown = frame.assign(build=series_labels(frame, series)) if len(frame) else frame
    builds = [str(b) for b in shown[series].dropna().unique()] if len(shown) else []
    colour_of = colours(sorted(builds))
    parts = []
    if verdict is not None:
        parts.append(
            acceptance_section(verdict, frame, baseline, rule_set, findings, baseline_source)
        )
    parts.append(summary_section(frame, sources))
    if len(frame):
        parts.append(collectives_section(shown, series, colour_of))
        parts.append(copies_section(shown, series, colour_of, {b: topo for b in builds}))
        parts.append(tokens_section(shown, series, colour_of))
    for source in sources:  # a cluster campaign's node x node picture (pairs, ring)
        fabric = fabric_section(source) if Path(source).is_dir() else None
        if fabric:
            parts.append(fabric)
    if history is not None:  # a results directory: its runs over time (report --history)
        from gpulane.analysis.report.history import history_section

        parts.append(history_section(history))
    parts.append(topology_section(topo, topology_source))
    if len(frame):
        parts.append(errors_section(frame))
    return page(title, parts)
