"""Builds or runs side by side (:mod:`.core`), why figures did not meet (:mod:`.apart`),
the comparison as text, Markdown, CSV or a terminal table (:mod:`.render`)."""

from __future__ import annotations

from gpulane.analysis.compare.core import (
    DEFAULT_METRICS,
    Comparison,
    compare,
    summarize,
    unique_labels,
)
from gpulane.analysis.compare.render import (
    display_frame,
    markdown_table,
    print_terminal,
    summary_display,
    to_csv,
    to_markdown,
)

__all__ = [
    "DEFAULT_METRICS",
    "Comparison",
    "compare",
    "display_frame",
    "markdown_table",
    "print_terminal",
    "summarize",
    "summary_display",
    "to_csv",
    "to_markdown",
    "unique_labels",
]
