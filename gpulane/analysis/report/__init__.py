"""Self-contained HTML pages: the run report (:mod:`.page`), the build comparison page
(:mod:`.compare_page`), built from sections (:mod:`.summary`, :mod:`.checks`,
:mod:`.sections`, :mod:`.topology`) in one HTML style (:mod:`.html`)."""

from __future__ import annotations

from gpulane.analysis.report.page import render_report

__all__ = ["render_report"]
