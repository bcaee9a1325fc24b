"""A comparison as text cells: the terminal table, Markdown, CSV; and the notes that say
which kinds were not compared and why."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpulane.analysis.compare.core import Comparison


def _fmt(value: Any, metric: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        if metric.startswith("ratio") or metric == "ratio":
            return f"{value:.3f}"
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.1f}"
    return str(value)


def display_frame(cmp: Comparison) -> pd.DataFrame:
    """The comparison as text cells, the way the terminal and Markdown show it."""
    out = []
    for r in cmp.table.to_dict("records"):
        line: dict[str, str] = {
            "kind": r["kind"],
            "figure": r["figure"],
            "metric": f"{r['metric']} ({r['unit']})" if r["unit"] else r["metric"],
        }
        for label in cmp.labels:
            line[label] = _fmt(r[label])
        for label in cmp.labels[1:]:
            line[f"{label}/{cmp.labels[0]}"] = _fmt(r[f"ratio:{label}"], "ratio")
        line["paths"] = " | ".join(str(r[f"path:{x}"]) for x in cmp.labels)
        out.append(line)
    return pd.DataFrame(out)


def over_text(entry: Mapping[Any, Any], label: str) -> str:
    """Which figures a summary ratio is over: ``14 of 16 (left out, a side at 0: 8 B, 16 B)``."""
    used = entry.get(f"used:{label}")
    if used is None or (isinstance(used, float) and math.isnan(used)):
        return "-"
    text = f"{int(used)} of {entry['figures']}"
    left = entry.get(f"left_out:{label}")
    if isinstance(left, str) and left:
        text += f" (left out, a side at 0: {left})"
    return text


def notes_lines(cmp: Comparison) -> list[str]:
    """The comparison's notes as lines: kinds not compared, and why."""
    return [f"not compared: {n}" for n in cmp.notes]


def noise_text(ratio: Any, spread: Any) -> str:
    """The noise beside a ratio: the ratios' scatter, and whether the ratio is within it
    ("±4 %, within noise"); "-" where fewer than 3 ratios give no scatter."""
    if spread is None or spread != spread or ratio is None or ratio != ratio:
        return "-"
    within = abs(math.log(float(ratio))) <= math.log1p(float(spread))
    return f"±{100 * float(spread):.0f} %" + (", within noise" if within else "")


def summary_display(cmp: Comparison) -> pd.DataFrame:
    out = []
    for r in cmp.summary.to_dict("records"):
        line = {
            "kind": r["kind"],
            "op": r["op"],
            "metric": r["metric"],
            "figures": str(r["figures"]),
        }
        for label in cmp.labels[1:]:
            line[f"{label}/{cmp.labels[0]} geomean"] = _fmt(r.get(f"geomean:{label}"), "ratio")
            line[f"{label} noise"] = noise_text(r.get(f"geomean:{label}"), r.get(f"spread:{label}"))
            if "at" in r and isinstance(r.get("at"), str):
                line[f"{label}/{cmp.labels[0]} at {r['at']}"] = _fmt(
                    r.get(f"largest:{label}"), "ratio"
                )
            line[f"{label}/{cmp.labels[0]} over"] = over_text(r, label)
        out.append(line)
    return pd.DataFrame(out).fillna("-") if out else pd.DataFrame()


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub Markdown table of text cells (no tabulate needed)."""
    if frame.empty:
        return "_no rows_\n"
    cols = [str(c) for c in frame.columns]

    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def to_markdown(cmp: Comparison) -> str:
    parts = [f"## Compare: {' vs '.join(cmp.labels)}", ""]
    if not cmp.summary.empty:
        parts += [
            "### Summary (ratios to " + cmp.labels[0] + ")",
            "",
            markdown_table(summary_display(cmp)),
        ]
    parts += ["### Figures", "", markdown_table(display_frame(cmp))]
    if cmp.notes:
        parts += ["", *[f"- {line}" for line in notes_lines(cmp)], ""]
    return "\n".join(parts)


def to_csv(cmp: Comparison) -> str:
    return str(cmp.table.to_csv(index=False))


def print_terminal(cmp: Comparison, file: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file)
    if file is not None or not console.is_terminal:
        console = Console(file=file, width=220)
    if cmp.table.empty:
        console.print("no shared figures between " + ", ".join(cmp.labels))
        for line in notes_lines(cmp):
            console.print(f"# {line}", highlight=False)
        return
    for title, frame in (
        (f"Summary: ratios to {cmp.labels[0]}", summary_display(cmp)),
        (f"Compare: {' vs '.join(cmp.labels)}", display_frame(cmp)),
    ):
        if frame.empty:
            continue
        t = Table(title=title, show_lines=False)
        for c in frame.columns:
            t.add_column(
                str(c),
                justify="left" if c in ("kind", "figure", "metric", "op", "paths") else "right",
            )
        for row in frame.itertuples(index=False):
            t.add_row(*[str(v) for v in row])
        console.print(t)
    for note in cmp.notes:
        console.print(f"# not compared: {note}", highlight=False)
