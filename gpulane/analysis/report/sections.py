"""The measured sections of a page: collectives, copies, token rates, errors. Each is its
plots (inline SVG) followed by the table behind every plot in a collapsed box. ``series``
is the column that tells the lines apart (build on a report, side on a comparison);
tables give the median over the runs of a series and how many runs it pooled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pandas as pd

from gpulane.analysis.plots import Plot, collective_plots, copy_plots, split_name, tokens_plots
from gpulane.analysis.plots.collectives import panels
from gpulane.analysis.report.html import details, e, figure, num, section, size_text, table
from gpulane.analysis.rules import expected_gbps
from gpulane.analysis.rules.measurement import describe
from gpulane.record import frame_rows, row_value
from gpulane.topology.model import Topology

VARIANT = {True: "in-place", False: "out-of-place"}


def _variant(value: object) -> str:
    return VARIANT.get(value, "") if isinstance(value, bool) else ""


def collective_table(rows: pd.DataFrame, series: str, table_id: str) -> str:
    """Size down the side; per series (and variant) the median busbw and time."""
    rows = rows.assign(
        line=[
            f"{s} {_variant(v)}".strip()
            for s, v in zip(rows[series], rows["in_place"], strict=True)
        ]
    )
    busbw = rows.pivot_table(
        index="size_bytes", columns="line", values="busbw_gbps", aggfunc="median", sort=False
    )
    time = rows.pivot_table(
        index="size_bytes", columns="line", values="time_us", aggfunc="median", sort=False
    )
    sizes = sorted(set(busbw.index) | set(time.index))
    out = pd.DataFrame({"size": [size_text(s) for s in sizes]})
    for line in dict.fromkeys(list(busbw.columns) + list(time.columns)):
        if line in busbw.columns:
            out[f"{line} busbw GB/s"] = [num(v) for v in busbw[line].reindex(sizes)]
        if line in time.columns:
            out[f"{line} time µs"] = [num(v) for v in time[line].reindex(sizes)]
    return table(out, table_id, left=["size"])


def collectives_section(
    frame: pd.DataFrame, series: str, colour_of: Mapping[str, str], plots: list[Plot] | None = None
) -> str:
    rows = frame[(frame["kind"] == "collective") & (frame["status"] == "ok")].dropna(
        subset=["size_bytes"]
    )
    if rows.empty:
        return section("collectives", "Collectives", "<p>No collective rows.</p>")
    plots = plots if plots is not None else collective_plots(frame, series, colour_of)
    by_title = {p.title.split(" (")[0]: p for p in plots}
    parts = []
    for i, (title, part) in enumerate(panels(rows)):
        plot = by_title.get(title)
        parts.append(figure(plot) if plot else f"<h3>{e(title)}</h3><p>Nothing to plot.</p>")
        runs = part["run_id"].nunique()
        parts.append(
            details(
                f"table: {title}, median of {runs} run(s) per point",
                collective_table(part, series, f"table-collective-{i}"),
            )
        )
    return section("collectives", "Collectives", "".join(parts))


def with_line_rates(
    frame: pd.DataFrame, series: str, topology_of: Mapping[str, Topology | None]
) -> pd.DataFrame:
    """Copy rows with ``expected_gbps`` filled from their series' topology where missing."""
    out = frame.copy()
    is_copy = out["kind"] == "copy"
    for i in out.index[is_copy & out["expected_gbps"].isna()]:
        row = frame_rows(out.loc[[i]])[0]
        rate, _why = expected_gbps(row, topology_of.get(str(row_value(row, series))))
        if rate is not None:
            out.at[i, "expected_gbps"] = rate
    return out


def copies_section(
    frame: pd.DataFrame,
    series: str,
    colour_of: Mapping[str, str],
    topology_of: Mapping[str, Topology | None] | None = None,
) -> str:
    rows = frame[(frame["kind"] == "copy") & (frame["status"] == "ok")]
    if rows.empty:
        return section("copies", "Copies", "<p>No copy rows (gpulane copy).</p>")
    rows = with_line_rates(rows, series, topology_of or {})
    plots = copy_plots(rows, series, colour_of)
    # solo and all-GPUs-at-once copies of one GPU are two measurements: never one median
    rows = rows.assign(copied=[describe(r) or "-" for r in frame_rows(rows)])
    keys = [series, "op", "memory", "bidirectional", "src", "dst", "size_bytes", "copied"]
    data = rows.assign(**{k: rows[k].astype(object).where(rows[k].notna(), "-") for k in keys})
    grouped = data.groupby(keys, sort=False).agg(
        gbps=("algbw_gbps", "median"),
        line=("expected_gbps", "median"),
        runs=("run_id", "nunique"),
        path=("path", lambda s: ",".join(sorted({str(p) for p in s.dropna()})) or "-"),
    )
    out = pd.DataFrame(
        [
            {
                series: k[0], "op": k[1], "memory": k[2],
                "bidirectional": "yes" if k[3] is True else "no",
                "src → dst": f"{k[4]} → {k[5]}", "size": size_text(k[6]), "copied": k[7],
                "GB/s": num(v["gbps"]), "line rate GB/s": num(v["line"]),
                "of line rate": "-" if pd.isna(v["line"]) or not v["line"] else f"{100 * v['gbps'] / v['line']:.0f}%",
                "path": v["path"], "runs": v["runs"],
            }
            for k, v in _items(grouped)
        ]
    )  # fmt: skip
    body = "".join(figure(p) for p in plots) + details(
        f"table: copies, median over runs per GPU ({len(out)} lines)",
        table(out, "table-copy", left=[series, "op", "memory", "src → dst", "path"]),
    )
    return section("copies", "Copies against line rate", body)


def _items(grouped: pd.DataFrame) -> list[tuple[tuple[Any, ...], pd.Series]]:
    """(key tuple, values) per line of a frame grouped by several columns."""
    return [(cast(tuple[Any, ...], k), v) for k, v in grouped.iterrows()]


def tokens_table(rows: pd.DataFrame, series: str) -> pd.DataFrame:
    rows = rows.assign(
        split=[split_name(t, p) for t, p in zip(rows["tp"], rows["pp"], strict=True)]
    )
    keys = [series, "model", "split", "op", "batch", "input_len", "output_len"]
    data = rows.assign(**{k: rows[k].astype(object).where(rows[k].notna(), "-") for k in keys})
    grouped = data.groupby(keys, sort=True).agg(
        rate=("tokens_per_s", "median"),
        ttft=("ttft_ms", "median"),
        itl=("itl_ms_p50", "median"),
        share=("comm_share", "median"),
        runs=("run_id", "nunique"),
    )
    return pd.DataFrame(
        [
            {
                series: k[0], "model": k[1], "split": k[2], "op": k[3], "batch": k[4],
                "input": k[5], "output": k[6], "tokens/s": num(v["rate"]),
                "TTFT ms": num(v["ttft"]), "ITL p50 ms": num(v["itl"]),
                "comm share": "-" if pd.isna(v["share"]) else f"{100 * v['share']:.0f}%",
                "runs": v["runs"],
            }
            for k, v in _items(grouped)
        ]
    )  # fmt: skip


def tokens_section(frame: pd.DataFrame, series: str, colour_of: Mapping[str, str]) -> str:
    rows = frame[(frame["kind"] == "tokens") & (frame["status"] == "ok")]
    if rows.empty:
        return section("tokens", "Token rates", "<p>No token rows (gpulane tokens).</p>")
    plots = tokens_plots(rows, series, colour_of)
    out = tokens_table(rows, series)
    body = "".join(figure(p) for p in plots) + details(
        f"table: token rates, median over runs ({len(out)} lines)",
        table(out, "table-tokens", left=[series, "model", "split", "op"]),
    )
    return section("tokens", "Token rates and comm share", body)


def errors_section(frame: pd.DataFrame) -> str:
    rows = frame[frame["status"] != "ok"]
    if rows.empty:
        return ""
    out = pd.DataFrame(
        {
            "run": rows["run_id"].astype(str),
            "build": rows["build"].astype(str),
            "kind": rows["kind"].astype(str),
            "op": rows["op"].astype(str),
            "status": rows["status"].astype(str),
            "error": rows["error"].fillna("").astype(str),
        }
    )
    body = f"<p>{len(out)} row(s) did not measure.</p>" + details(
        "table: error rows", table(out, "table-errors", left=list(out.columns[:-1]), wrap=["error"])
    )
    return section("errors", "Errors", body)
