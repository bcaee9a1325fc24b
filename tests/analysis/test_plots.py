"""The plot style: log axes by the data's range, legends outside the axes, titles clear of
the tick labels, in-place apart from out-of-place, failing points marked, SVG that can sit
many to a page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpulane.analysis.plots import all_plots, collective_plots, copy_plots, tokens_plots, write_pngs
from gpulane.analysis.plots.accept import baseline_plots
from gpulane.analysis.plots.style import styled, wants_log
from gpulane.analysis.rules import Check
from gpulane.analysis.store import frame_from_rows
from gpulane.errors import InputError
from tests.analysis.fixture_rows import copy_rows, nccl_rows, tokens_rows


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rows = nccl_rows("h200x2/nccl-tests-all_reduce.txt", build="nvlink", run_id="a")
    rows += nccl_rows(
        "h200x2/nccl-tests-all_reduce-p2p-disabled.txt", build="pcie-host", run_id="b"
    )
    rows += copy_rows(build="nvlink", run_id="a", expected=63.0, p2p_gbps={("GPU0", "GPU1"): 390.0})
    rows += copy_rows(build="pcie-host", run_id="b", gbps={"GPU0": 50.0, "GPU1": 50.0})
    rows += tokens_rows(build="nvlink", run_id="a", rate=1000.0)
    rows += tokens_rows(build="pcie-host", run_id="b", rate=600.0)
    return frame_from_rows(rows)


def boxes(fig: Any) -> tuple[Any, list[Any]]:
    """The figure laid out as it is saved, and its visible axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    with styled():
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
    return canvas.get_renderer(), [ax for ax in fig.axes if ax.get_visible()]


def test_log_axes_by_the_range_of_the_data() -> None:
    assert wants_log([0.01, 0.5, 340.0])  # busbw from 8 B to 8 GiB
    assert not wants_log([41.0, 50.0, 55.5])  # copies of 1 MiB..256 MiB
    assert not wants_log([0.0, 0.0, 5.0])  # zeros are not a range


def test_collective_curves_log_log_with_the_legend_outside(frame: pd.DataFrame) -> None:
    (plot,) = collective_plots(frame)
    renderer, axes = boxes(plot.figure)
    busbw, time = axes
    assert busbw.get_yscale() == "log" and time.get_yscale() == "log"
    assert busbw.get_xscale() == "log" and busbw.xaxis.get_scale() == "log"
    legend = plot.figure.legends[0].get_window_extent(renderer)
    for ax in axes:
        assert not legend.overlaps(ax.get_tightbbox(renderer)), "legend over the axes"
    title = plot.figure._suptitle.get_window_extent(renderer)
    for ax in axes:
        assert not title.overlaps(ax.get_tightbbox(renderer))
    # one colour per build, out-of-place solid and in-place dashed
    styles = {(line.get_color(), line.get_linestyle()) for line in busbw.get_lines()}
    assert len({c for c, _ in styles}) == 2 and {s for _, s in styles} == {"-", "--"}
    labels = [t.get_text() for t in plot.figure.legends[0].get_texts()]
    # nccl-tests logs say no transport: the topology's label, named as the topology's
    assert labels == [
        "nvlink (topology NV18)",
        "pcie-host (topology NV18)",
        "out-of-place",
        "in-place",
    ]
    assert "busbw (log axis)" in plot.alt and "time per operation (log axis)" in plot.alt


def test_legend_names_the_transport_the_run_took(frame: pd.DataFrame) -> None:
    """P2P off over an NVLink pair runs through host memory: the legend says SHM, and keeps
    the topology's NV18 beside it as the machine's, not the run's, path."""
    coll = frame["kind"] == "collective"
    frame = frame.copy()
    frame.loc[coll & (frame["build"] == "nvlink"), "transport"] = "P2P/CUMEM"
    frame.loc[coll & (frame["build"] == "pcie-host"), "transport"] = "SHM"
    (plot,) = collective_plots(frame)
    labels = [t.get_text() for t in plot.figure.legends[0].get_texts()]
    assert labels[:2] == ["nvlink (P2P/CUMEM; topology NV18)", "pcie-host (SHM; topology NV18)"]


def test_a_linear_value_axis_is_captioned_linear(frame: pd.DataFrame) -> None:
    """Busbw of a narrow range is drawn on a linear axis: the caption must not say log."""
    part = frame[(frame["kind"] == "collective") & (frame["size_bytes"] >= 1 << 26)]
    (plot,) = collective_plots(part)
    busbw = boxes(plot.figure)[1][0]
    assert busbw.get_yscale() == "linear"
    assert "busbw (linear axis)" in plot.alt and "log-log" not in plot.alt


def test_copy_panels_titles_clear_of_the_size_axis(frame: pd.DataFrame) -> None:
    (plot,) = copy_plots(frame)
    renderer, axes = boxes(plot.figure)
    assert [ax.get_title() for ax in axes] == ["d2h pinned", "h2d pinned", "p2p device"]
    # the second row's title must not sit on the first row's size labels
    first_row_labels = [
        t.get_window_extent(renderer) for t in axes[0].get_xticklabels() if t.get_text()
    ]
    third_title = axes[2].title.get_window_extent(renderer)
    assert first_row_labels and not any(third_title.overlaps(b) for b in first_row_labels)
    # the line rate the rows carry, dotted at 63 GB/s; pcie-host rows carry none
    dotted = [ln for ln in axes[1].get_lines() if ln.get_linestyle() == ":"]
    assert [ln.get_ydata()[0] for ln in dotted] == [63.0]
    assert axes[1].get_yscale() == "linear" and axes[1].get_ylim()[0] == 0


def test_tokens_per_batch_with_comm_share(frame: pd.DataFrame) -> None:
    (plot,) = tokens_plots(frame)
    assert plot.name == "tokens-llama-1b-input-128-output-128"
    _renderer, axes = boxes(plot.figure)
    assert [ax.get_title() for ax in axes] == ["decode: tokens/s"]  # no comm share in the rows
    heights = sorted(
        round(float(ln.get_ydata()[0])) for ln in axes[0].get_lines() if len(ln.get_ydata())
    )
    assert heights == [420, 600, 700, 1000]  # TP=2 and PP=2 (0.7x) of both builds


def test_failing_points_marked_against_the_baseline(frame: pd.DataFrame) -> None:
    current = frame[frame["build"] == "pcie-host"]
    baseline = frame[frame["build"] == "nvlink"]
    check = Check("collective_busbw_vs_baseline", "fail", "baseline", "vm", "below",
                  figure="all_reduce float 1 GiB in-place", value=27.24, threshold=295.0,
                  unit="GB/s", margin=-0.9)  # fmt: skip
    plots = baseline_plots(current, baseline, [check])
    coll = next(p for p in plots if p.name.startswith("accept-collective"))
    busbw = coll.figure.axes[0]
    crosses = [ln for ln in busbw.get_lines() if ln.get_marker() == "X"]
    assert len(crosses) == 1
    assert list(crosses[0].get_xdata()) == [1 << 30] and list(crosses[0].get_ydata()) == [27.24]
    assert not [ln for ln in coll.figure.axes[1].get_lines() if ln.get_marker() == "X"]


def test_svg_fits_a_page_of_many(frame: pd.DataFrame, tmp_path: Path) -> None:
    plots = all_plots(frame)
    svgs = [p.svg() for p in plots]
    ids: list[str] = []
    for p, svg in zip(plots, svgs, strict=True):
        assert svg.startswith(f'<svg id="plot-{p.name}"') and "<?xml" not in svg
        assert "<metadata>" not in svg and "<text" in svg  # text stays text: small, crisp
        ids += re.findall(r' id="([^"]+)"', svg)
        for ref in re.findall(r"url\(#([^)]+)\)", svg):
            assert ref.startswith(p.name + "-")
    assert len(ids) == len(set(ids))
    written = write_pngs(plots, tmp_path / "png")
    assert [w.read_bytes()[:4] for w in written] == [b"\x89PNG"] * len(plots)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="--plot: cannot write"):
        write_pngs(plots, blocker / "png")


@pytest.mark.parametrize("axis", ["x", "y"])
def test_log_axes_are_labelled_in_plain_text(axis: str) -> None:
    """A log axis's labels are plain numbers ("10", "100", "20"), not mathtext
    ($\\mathdefault{10^{2}}$): matplotlib parses every mathtext label at each draw (0.7 of
    the 1.6 s an accept page's copy plot took). Minor labels are kept where the default
    shows them (a range under two decades)."""
    from gpulane.analysis.plots.style import figure, scale_axis

    values = [3.0, 20.0, 90.0]
    with styled():
        fig = figure()
        ax = fig.subplots()
        ax.plot(values, values)
        assert scale_axis(ax, axis, values)
        fig.canvas.draw()
        ticks = ax.yaxis if axis == "y" else ax.xaxis
        labels = [t.get_text() for t in ticks.get_ticklabels(which="both") if t.get_text()]
    assert labels and not [t for t in labels if "$" in t], labels
    assert "10" in labels and any(t in labels for t in ("20", "30", "50")), labels
