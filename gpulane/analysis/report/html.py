"""The HTML of every gpulane page: the style sheet, tables, collapsible boxes, inline plots.

A page is one file with nothing fetched: styles inline, plots inline SVG, no script.
Layout rules that let a page hold one run or a hundred:

- the body has a maximum width; plots scale down to it (``svg{max-width:100%}``);
- every table sits in its own scroll box (``div.scroll``), so a wide one scrolls inside
  the page instead of widening it;
- cells do not wrap (``8 B`` stays on one line) except text columns marked ``wrap``;
- long words (paths, run ids) in running text may break anywhere.
"""

from __future__ import annotations

import html
import math
import multiprocessing
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import pandas as pd

from gpulane import __version__
from gpulane.analysis.plots import Plot
from gpulane.record import utc_now

CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0 auto;
  padding:16px 24px 48px;max-width:1280px;color:#1d2430;line-height:1.45}
h1{font-size:22px;margin:8px 0 4px} h2{font-size:18px;margin-top:32px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:20px 0 6px}
p,li,dd,.meta,figcaption{overflow-wrap:anywhere}
.meta{color:#57606a;font-size:13px}
.scroll{overflow-x:auto;max-width:100%;margin:6px 0}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right;vertical-align:top;white-space:nowrap}
th{background:#f3f5f7;position:sticky;top:0} td.l,th.l{text-align:left}
td.wrap{white-space:normal;min-width:16em;max-width:40em}
tr.fail td{background:#ffebe9} tr.skip td{color:#6e7781}
.badge{display:inline-block;padding:4px 12px;border-radius:6px;font-weight:700;font-size:16px;color:#fff}
.badge.pass{background:#1a7f37} .badge.fail{background:#cf222e} .badge.incomplete{background:#9a6700}
span.st-pass{color:#1a7f37;font-weight:600} span.st-fail{color:#cf222e;font-weight:700} span.st-skip{color:#6e7781}
td.nv{background:#dafbe1} td.pcie{background:#fff8c5} td.sys{background:#ffebe9} td.self{color:#8c959f}
figure{margin:10px 0 4px} figure svg{max-width:100%;height:auto;display:block}
figcaption{font-size:12px;color:#57606a}
details{margin:6px 0 14px} details>summary{cursor:pointer;color:#0969da;font-size:13px}
ul.warn li{color:#9a6700}
.verdict{border-left:4px solid #0969da;background:#f6f8fa;padding:8px 14px;margin:12px 0}
.verdict p{margin:4px 0;font-size:15px}
.cards{display:flex;flex-wrap:wrap;gap:14px}
.card{flex:1 1 380px;min-width:0;border:1px solid #d0d7de;border-radius:6px;padding:6px 12px}
.card h3{margin-top:6px}
.sev-high,.sev-error,.sev-critical{color:#cf222e;font-weight:700} .sev-warning,.sev-medium{color:#9a6700;font-weight:600}
.sev-info,.sev-low{color:#57606a}
"""


def e(value: Any) -> str:
    """Escaped text; None as nothing."""
    return html.escape("" if value is None else str(value))


def num(value: Any, digits: int = 4) -> str:
    """A number in ``digits`` significant digits ('-' for none): 327.8, 0.0123, 12345."""
    if value is None:
        return "-"
    try:
        f = float(value)
    except (TypeError, ValueError):
        return e(value)
    if math.isnan(f):
        return "-"
    return f"{f:.{digits}g}" if abs(f) < 10**digits else f"{f:.0f}"


def table(
    frame: pd.DataFrame,
    table_id: str,
    left: Iterable[str] = (),
    wrap: Iterable[str] = (),
    raw: Iterable[str] = (),
    row_class: Sequence[str] | None = None,
) -> str:
    """Text cells as a table in its own scroll box. ``left``: left-aligned columns;
    ``wrap``: text columns that may wrap; ``raw``: cells already HTML."""
    left, wrap, raw = set(left), set(wrap), set(raw)

    def cls(c: Any) -> str:
        names = ("l" if c in left or c in wrap else "") + (" wrap" if c in wrap else "")
        return f' class="{names.strip()}"' if names.strip() else ""

    head = "".join(f"<th{cls(c)}>{e(c)}</th>" for c in frame.columns)
    body = []
    for i, row in enumerate(frame.itertuples(index=False)):
        rc = f' class="{row_class[i]}"' if row_class else ""
        cells = "".join(
            f"<td{cls(c)}>{v if c in raw else e(v)}</td>"
            for c, v in zip(frame.columns, row, strict=True)
        )
        body.append(f"<tr{rc}>{cells}</tr>")
    return (
        f'<div class="scroll"><table id="{e(table_id)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def details(summary: str, body: str, element_id: str | None = None) -> str:
    """A collapsed box: the summary line shows, the body opens on a click."""
    ident = f' id="{e(element_id)}"' if element_id else ""
    return f"<details{ident}><summary>{e(summary)}</summary>{body}</details>"


def figure(plot: Plot) -> str:
    held = _HELD.get()
    if held is not None:  # drawn later, all at once (figures_at_once)
        held.append(plot)
        svg = f"\x00plot{len(held) - 1}\x00"
    else:
        svg = plot.svg()
    return f"<figure>{svg}<figcaption>{e(plot.alt)}</figcaption></figure>"


# Plots whose SVG figure() left to draw: drawing is most of a page's time (matplotlib's
# layout and text measuring: 4-5 s of the accept report on 4x H200, one figure after
# another), and each figure is drawn by itself, so they are drawn in processes at once.
_HELD: ContextVar[list[Plot] | None] = ContextVar("held_plots", default=None)
_DRAWING: list[Plot] = []
DRAW_TIMEOUT_S = 120


@contextmanager
def figures_at_once() -> Iterator[list[Plot]]:
    """Within: figure() holds its plot back and leaves a mark; :func:`draw_held` fills them."""
    held: list[Plot] = []
    token = _HELD.set(held)
    try:
        yield held
    finally:
        _HELD.reset(token)


def _draw(index: int) -> str:
    return _DRAWING[index].svg()


def draw_held(text: str, held: list[Plot]) -> str:
    """``text`` with each mark replaced by its plot's SVG, drawn in forked processes where
    there are several (in this process where fork is not there or fails)."""
    if not held:
        return text
    svgs: list[str] | None = None
    workers = min(len(held), os.cpu_count() or 1)
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        _DRAWING[:] = held  # the children inherit the figures: nothing to pickle
        try:
            with warnings.catch_warnings():
                # Python 3.12 warns of fork beside threads (CUDA's, NVML's): the children
                # only draw; a child that hangs all the same is given up on (timeout)
                warnings.simplefilter("ignore", DeprecationWarning)
                with multiprocessing.get_context("fork").Pool(workers) as pool:
                    svgs = pool.map_async(_draw, range(len(held))).get(timeout=DRAW_TIMEOUT_S)
        except Exception:
            svgs = None
        finally:
            _DRAWING.clear()
    if svgs is None:
        svgs = [p.svg() for p in held]
    for i, svg in enumerate(svgs):
        text = text.replace(f"\x00plot{i}\x00", svg, 1)
    return text


def section(section_id: str, heading: str, body: str) -> str:
    return f'<section id="{e(section_id)}"><h2>{e(heading)}</h2>{body}</section>'


def page(title: str, parts: Sequence[str], subtitle: str = "") -> str:
    """A whole self-contained page."""
    meta = f"gpulane {__version__}, generated {utc_now()}" + (f" · {subtitle}" if subtitle else "")
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
            f"<h1>{e(title)}</h1>",
            f'<p class="meta">{e(meta)}</p>',
            *parts,
            "</body></html>",
        ]
    )


def size_text(value: Any) -> str:
    from gpulane.units import format_size

    try:
        return format_size(int(value)) if pd.notna(value) else "-"
    except (TypeError, ValueError):
        return "-"
