"""A page's plots are drawn at once (forked processes) and land where each was placed."""

from __future__ import annotations

from gpulane.analysis.plots import Plot
from gpulane.analysis.plots.style import figure as new_figure
from gpulane.analysis.report.html import draw_held, figure, figures_at_once


def _plot(name: str, points: int) -> Plot:
    fig = new_figure()
    ax = fig.add_subplot()
    ax.plot(range(points), [x * x for x in range(points)], label=name)
    ax.set_title(f"{name} title")
    return Plot(name=name, title=f"{name} title", alt=f"{name} alt", figure=fig)


def test_held_plots_are_drawn_in_their_places() -> None:
    names = ["one", "two", "three"]
    with figures_at_once() as held:
        page = "".join(f"<h3>{n}</h3>" + figure(_plot(n, 5 + i)) for i, n in enumerate(names))
    assert len(held) == 3 and "<svg" not in page
    text = draw_held(page, held)
    assert "\x00" not in text
    # each plot's own SVG, under its own heading, in order
    places = [text.index(f"<h3>{n}</h3>") for n in names]
    svgs = [text.index(f'<svg id="plot-{n}"') for n in names]
    assert places[0] < svgs[0] < places[1] < svgs[1] < places[2] < svgs[2]
    assert all(f"{n} alt" in text for n in names)


def test_outside_the_block_a_plot_is_drawn_at_once() -> None:
    text = figure(_plot("alone", 4))
    assert '<svg id="plot-alone"' in text and "\x00" not in text
