"""The build comparison page (`gpulane compare --html`), in the order a reader asks:

1. the verdict in two lines (:mod:`.verdict`), and what was not compared and why;
2. each build's topology, with the transport NCCL used where the rows say;
3. collective curves, busbw and latency against size, one colour per build;
4. copy bandwidth against line rate;
5. token rates per batch and comm share;
6. the advisor's split per build (made on the planning floor and passed in as HTML);
7. the figures table with ratios to the first build.

Every plot has its table in a collapsed box beneath it. Element ids: ``verdict``,
``notes``, ``topology``, ``collectives``, ``copies``, ``tokens``, ``advice``, ``figures``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from gpulane.analysis.compare import Comparison, display_frame, summary_display
from gpulane.analysis.plots import colours
from gpulane.analysis.report.html import details, page, section, table
from gpulane.analysis.report.sections import collectives_section, copies_section, tokens_section
from gpulane.analysis.report.topology import BuildTopology, builds_topology_section
from gpulane.analysis.report.verdict import verdict_section


def figures_section(cmp: Comparison) -> str:
    summary = summary_display(cmp)
    full = display_frame(cmp)
    body = ""
    if len(summary):
        body += f"<h3>Ratios to {cmp.labels[0]}</h3>" + table(
            summary, "table-summary", left=["kind", "op", "metric"]
        )
    body += details(
        f"table: every shared figure ({len(full)} lines)",
        table(full, "table-figures", left=["kind", "figure", "metric", "paths"])
        if len(full)
        else "<p>No shared figures.</p>",
    )
    return section("figures", "Figures side by side", body)


def render_compare(
    cmp: Comparison,
    sides: Sequence[BuildTopology],
    advice_html: str | None = None,
    advised: Mapping[str, str] | None = None,
    title: str | None = None,
) -> str:
    """The whole page. ``sides``: per label its rows and topology; ``advice_html``: the
    advisor's section (or None: left out, with a line saying so)."""
    colour_of = colours(cmp.labels)
    frame = cmp.frame if len(cmp.frame) else pd.DataFrame()
    topology_of = {s.label: s.topology for s in sides}
    parts = [
        verdict_section(cmp, advised),
        builds_topology_section(sides),
    ]
    if len(frame):
        parts += [
            collectives_section(frame, "side", colour_of),
            copies_section(frame, "side", colour_of, topology_of),
            tokens_section(frame, "side", colour_of),
        ]
    parts.append(
        advice_html
        or section("advice", "Advisor: TP or PP per build", "<p>The advisor did not run.</p>")
    )
    parts.append(figures_section(cmp))
    heading = title or "gpulane compare: " + " vs ".join(cmp.labels)
    return page(heading, parts, subtitle=f"ratios to {cmp.labels[0]}")
