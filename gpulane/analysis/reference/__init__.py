"""Reference figures: is a measured figure normal for its machine? (docs/reference.md)

``reference_lines`` is what `gpulane results`, `compare` and `accept` print under their
tables: one line per figure that has a reference, one line per group of figures that
has none.
"""

from __future__ import annotations

import os

import pandas as pd

from gpulane.analysis.reference.judge import NONE, Facts, Judgement, facts_of, judge, judge_frame
from gpulane.analysis.reference.table import Entry, ReferenceTable, read_table, shipped_tables
from gpulane.units import format_size

__all__ = [
    "Entry",
    "Facts",
    "Judgement",
    "ReferenceTable",
    "facts_of",
    "judge",
    "judge_frame",
    "read_table",
    "reference_lines",
    "shipped_tables",
]


def reference_lines(
    frame: pd.DataFrame,
    results_dir: str | os.PathLike[str] | None = None,
    label: str = "build",
    table: ReferenceTable | None = None,
) -> list[str]:
    """``# reference: nvlink all_reduce float 8 GiB: 346 GB/s, normal for ...`` lines.

    Figures without a reference are gathered per machine and op into one line that says
    so, with the sizes they cover and the nearest figure the table holds (named, not used)."""
    table = table if table is not None else ReferenceTable.load(results_dir)
    judged = judge_frame(frame, table, by=("run_id", label) if label in frame else ("run_id",))
    lines: list[str] = []
    missing: dict[tuple[str, str], list[int]] = {}
    nearest: dict[tuple[str, str], str] = {}
    for row, j in judged:
        who = str(row.get(label) or row.get("run_id"))
        if j.status == NONE:
            f = j.facts
            key = (who, f.machine(size=False))
            missing.setdefault(key, []).append(f.size or 0)
            nearest[key] = j.nearest  # the largest size's, the figure that matters most
            continue
        lines.append(f"# reference: {who} {row.get('figure') or j.facts.op}: {j.text()}")
    for (who, machine), sizes in missing.items():
        span = format_size(min(sizes))
        if max(sizes) != min(sizes):
            span += f"–{format_size(max(sizes))}"
        n = len(sizes)
        near = nearest.get((who, machine))
        near = f"; nearest: {near}" if near else "; the table holds no figure of this op"
        lines.append(
            f"# reference: {who} {machine} {span}: no reference for this machine and figure "
            f"({n} figure{'s' if n != 1 else ''}{near}; `gpulane reference list` shows the "
            "table)"
        )
    return lines
