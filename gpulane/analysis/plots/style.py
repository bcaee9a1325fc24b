"""The one plot style of every gpulane page and PNG: colours, fonts, axes, legends, output.

- Colours: one per series (build, run or side), in the order the caller gives them, so a
  build keeps its colour on every plot of a page (:func:`colours`).
- Axes: a size axis is log2 with binary labels; any other axis is logarithmic when the
  data spans :data:`LOG_RANGE` or more, else linear (:func:`scale_axis`).
- Legends sit outside the axes, under the figure (:func:`legend_below`); constrained
  layout keeps titles, tick labels and legends from overlapping.
- Output: SVG text for HTML pages (fonts as text, small and crisp: :meth:`Plot.svg`), PNG
  bytes for chat (:meth:`Plot.png`).

Figures are :class:`matplotlib.figure.Figure` objects made without pyplot: no display,
no global figure state.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gpulane.units import format_size

# Okabe-Ito (colour-blind safe) first, then matplotlib's tab10 for larger sets.
PALETTE = (
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
FAIL_COLOUR = "#cf222e"
GREY = "#57606a"
# An axis whose positive values span this factor or more is drawn logarithmic.
LOG_RANGE = 30.0
WIDTH_IN = 9.0  # figure width in inches: about 860 px at 96 dpi, scaled down by CSS

RC: Any = {  # matplotlib rcParams (typed as Any: its stubs list every key)
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "axes.grid": True,
    "axes.grid.which": "both",
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 3.5,
    "svg.fonttype": "none",
    "savefig.dpi": 110,
}


@contextmanager
def styled() -> Iterator[None]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    with matplotlib.rc_context(RC):
        yield


def figure(width: float = WIDTH_IN, height: float = 3.6) -> Any:
    """A figure in the house style with constrained layout (no pyplot state)."""
    from matplotlib.figure import Figure

    with styled():
        return Figure(figsize=(width, height), layout="constrained")


@dataclass
class Plot:
    name: str  # file stem for --plot DIR, and the page's element id plot-<name>
    title: str
    alt: str
    figure: Any

    def svg(self) -> str:
        """The figure as an inline ``<svg>`` element (no XML prolog), sized by CSS."""
        buf = io.StringIO()
        with styled():
            self.figure.savefig(buf, format="svg", bbox_inches="tight")
        text = buf.getvalue()
        # the <svg> element alone (no XML prolog); the page's CSS scales it down to the
        # column (max-width: 100%, height: auto), its viewBox keeps the aspect ratio
        text = _own_ids(text[text.index("<svg") :], self.name)
        text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, count=1, flags=re.S)
        return text.replace("<svg", f'<svg id="plot-{self.name}" role="img"', 1)

    def png(self) -> bytes:
        buf = io.BytesIO()
        with styled():
            self.figure.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()


_ID = re.compile(r' id="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')


def _own_ids(svg: str, prefix: str) -> str:
    """Ids unique on a page of many plots: matplotlib numbers its groups (axes_1,
    line2d_1) afresh in every figure. Ids nothing refers to are dropped; the others
    (clip paths, markers) get the plot's name in front."""
    used = {m.group(2) for m in _REF.finditer(svg)}
    svg = _ID.sub(lambda m: f' id="{prefix}-{m.group(1)}"' if m.group(1) in used else "", svg)
    return _REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", svg)


def slug(text: str) -> str:
    """A file-name and element-id safe form of a title."""
    return re.sub(r"[^a-z0-9_.]+", "-", text.lower()).strip("-") or "plot"


def unique_names(plots: list[Plot]) -> list[Plot]:
    """The plots with their names made unique (``-2``, ``-3`` appended to repeats)."""
    seen: dict[str, int] = {}
    for p in plots:
        n = seen.get(p.name, 0) + 1
        seen[p.name] = n
        if n > 1:
            p.name = f"{p.name}-{n}"
    return plots


def colours(labels: Iterable[Any]) -> dict[str, str]:
    """One colour per label, in first-seen order."""
    out: dict[str, str] = {}
    for label in labels:
        key = str(label)
        if key not in out:
            out[key] = PALETTE[len(out) % len(PALETTE)]
    return out


def positive(values: Iterable[Any]) -> list[float]:
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if f > 0 and not math.isnan(f) and not math.isinf(f):
            out.append(f)
    return out


def wants_log(values: Iterable[Any]) -> bool:
    """True when the positive values span :data:`LOG_RANGE` or more."""
    vals = positive(values)
    return len(vals) >= 2 and max(vals) / min(vals) >= LOG_RANGE


def scale_axis(ax: Any, axis: str, values: Sequence[Any]) -> bool:
    """Log or linear by the data's range; returns True when log. A linear bandwidth or
    rate axis starts at zero so that bars and lines are read against nothing."""
    log = wants_log(values)
    if axis == "y":
        if log:
            ax.set_yscale("log")
            _plain_log_labels(ax.yaxis)
        else:
            ax.set_ylim(bottom=0)
    elif log:
        ax.set_xscale("log")
        _plain_log_labels(ax.xaxis)
    return log


def _plain_log_labels(axis: Any) -> None:
    """Log tick labels as plain text ("100", "20"), labelled as matplotlib's default
    does. The default writes them as mathtext ($10^{2}$), whose parser took 0.7 of the
    1.6 s an accept page's copy plot took to draw on a 2-core VM."""
    from matplotlib import ticker

    axis.set_major_formatter(ticker.LogFormatter())
    axis.set_minor_formatter(ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def size_axis(ax: Any, sizes: Iterable[Any]) -> None:
    """Message sizes on a log2 axis, labelled 8 B, 1 KiB, 1 MiB, ..."""
    from matplotlib import ticker

    vals = positive(sizes)
    ax.set_xscale("log", base=2)
    span = math.log2(max(vals) / min(vals)) if len(vals) >= 2 else 0.0
    # about six labels whatever the range: every 2nd, 4th or 8th power of two
    step = 1 if span <= 6 else 2 if span <= 12 else 4 if span <= 24 else 8
    ax.xaxis.set_major_locator(ticker.LogLocator(base=2**step, numticks=40))
    ax.xaxis.set_minor_locator(ticker.LogLocator(base=2, subs=(1.0,), numticks=80))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.xaxis.set_major_formatter(
        ticker.FuncFormatter(lambda x, _pos: format_size(round(x)) if x >= 1 else "")
    )
    ax.set_xlabel("message size")


def legend_below(fig: Any, handles: list[Any], ncols: int = 4) -> None:
    """One legend for the whole figure, outside and under the axes."""
    if not handles:
        return
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=max(1, min(ncols, len(handles))),
        frameon=False,
    )


def line_handle(colour: str, label: str, style: Any = "-", marker: str | None = "o") -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], color=colour, linestyle=style, marker=marker, label=label)


def grid_shape(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(max_cols, max(1, n))
    return math.ceil(n / cols), cols
