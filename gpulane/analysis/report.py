"""A self-contained HTML report of a run: summary, acceptance checks, plots, topology, tables.

One file, no external references: plots are PNG (matplotlib, Agg) embedded as base64
``data:`` URLs, styles are inline, tables are plain HTML. Element ids the tests (and
anyone scraping the report) can rely on: ``summary``, ``verdict``, ``checks``,
``plot-busbw``, ``plot-copy``, ``plot-tokens``, ``topology-matrix``, ``topology-gpus``,
``topology-warnings``, ``table-collective``, ``table-copy``, ``table-tokens``, ``table-errors``.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from gpulane import __version__
from gpulane.analysis import plots
from gpulane.analysis.rules import Verdict
from gpulane.record import utc_now
from gpulane.topology.model import Topology, as_topology
from gpulane.units import format_size

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1d2430;max-width:1400px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.meta{color:#57606a;font-size:13px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f3f5f7} td.l,th.l{text-align:left}
tr.fail td{background:#ffebe9} tr.skip td{color:#6e7781}
.badge{display:inline-block;padding:6px 14px;border-radius:6px;font-weight:700;font-size:18px;color:#fff}
.badge.pass{background:#1a7f37} .badge.fail{background:#cf222e}
span.st-pass{color:#1a7f37;font-weight:600} span.st-fail{color:#cf222e;font-weight:700} span.st-skip{color:#6e7781}
td.nv{background:#dafbe1} td.pcie{background:#fff8c5} td.sys{background:#ffebe9} td.self{color:#8c959f}
img.plot{max-width:100%;border:1px solid #d0d7de;margin:6px 0}
ul.warn li{color:#9a6700}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    try:
        f = float(value)
    except (TypeError, ValueError):
        return _e(value)
    if math.isnan(f):
        return "-"
    return f"{f:.{digits}g}" if abs(f) < 10**digits else f"{f:.0f}"


def html_table(
    frame: pd.DataFrame,
    table_id: str,
    left: Iterable[str] = (),
    row_class: Sequence[str] | None = None,
    raw: Iterable[str] = (),
) -> str:
    """Text cells as an HTML table; ``left`` columns left-aligned, ``raw`` columns not escaped."""
    left, raw = set(left), set(raw)
    head = "".join(f'<th class="{"l" if c in left else ""}">{_e(c)}</th>' for c in frame.columns)
    body = []
    for i, row in enumerate(frame.itertuples(index=False)):
        cls = f' class="{row_class[i]}"' if row_class else ""
        cells = "".join(
            f'<td class="{"l" if c in left else ""}">{v if c in raw else _e(v)}</td>'
            for c, v in zip(frame.columns, row, strict=False)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _img(name: str, png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img class="plot" id="plot-{name}" alt="{_e(alt)}" src="data:image/png;base64,{data}">'


# -- sections ------------------------------------------------------------------------------


def summary_section(frame: pd.DataFrame, sources: Sequence[str]) -> str:
    def uniq(col: str) -> str:
        vals = sorted({str(v) for v in frame[col].dropna()}) if col in frame.columns else []
        return ", ".join(vals[:12]) + (f" (+{len(vals) - 12})" if len(vals) > 12 else "") or "-"

    kinds = frame.groupby("kind").size().to_dict() if len(frame) else {}
    versions: dict[str, set[str]] = {}
    envs: dict[str, set[str]] = {}
    for v in frame.get("versions", pd.Series(dtype=object)):
        for k, x in (v or {}).items():
            versions.setdefault(k, set()).add(str(x))
    for v in frame.get("env", pd.Series(dtype=object)):
        for k, x in (v or {}).items():
            envs.setdefault(k, set()).add(str(x))
    items = [
        ("rows from", ", ".join(sources) or "-"),
        ("builds", uniq("build")),
        ("runs", uniq("run_id")),
        ("hosts", uniq("host")),
        ("rows", ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())) or "0"),
        ("backends", uniq("backend")),
        ("world sizes", uniq("world_size")),
        ("paths", uniq("path")),
        ("started", uniq("started_at")),
        (
            "versions",
            "; ".join(f"{k} {', '.join(sorted(v))}" for k, v in sorted(versions.items())) or "-",
        ),
        ("env", " ".join(f"{k}={'|'.join(sorted(v))}" for k, v in sorted(envs.items())) or "-"),
    ]
    t = pd.DataFrame(items, columns=["", "value"])
    return "<h2>Summary</h2>" + html_table(t, "summary", left=["", "value"])


def verdict_section(verdict: Verdict, rule_set: str | None = None) -> str:
    counts = verdict.counts()
    badge = "PASS" if verdict.passed else "FAIL"
    cls = "pass" if verdict.passed else "fail"
    failed = verdict.failed_rules()
    head = (
        f'<h2>Acceptance</h2><p id="verdict"><span class="badge {cls}">{badge}</span> '
        f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped"
        + (f" &mdash; rule set <b>{_e(rule_set)}</b>" if rule_set else "")
        + (f"<br>failed rules: <b>{_e(', '.join(failed))}</b>" if failed else "")
        + "</p>"
    )
    order = {"fail": 0, "pass": 1, "skip": 2}
    checks = sorted(verdict.checks, key=lambda c: order.get(c.status, 3))
    rows = []
    for c in checks:
        rows.append(
            {
                "status": f'<span class="st-{c.status}">{c.status.upper()}</span>',
                "rule": c.rule,
                "on": c.subject,
                "basis": c.basis,
                "value": _num(c.value) + (f" {c.unit}" if c.value is not None and c.unit else ""),
                "threshold": _num(c.threshold)
                + (f" {c.unit}" if c.threshold is not None and c.unit else ""),
                "by": f"{c.margin * 100:+.1f}%" if c.margin is not None else "-",
                "detail": c.message,
                "rule text": c.description,
            }
        )
    t = pd.DataFrame(
        rows,
        columns=[
            "status",
            "rule",
            "on",
            "basis",
            "value",
            "threshold",
            "by",
            "detail",
            "rule text",
        ],
    )
    return head + html_table(
        t,
        "checks",
        left=["status", "rule", "on", "basis", "detail", "rule text"],
        row_class=[c.status for c in checks],
        raw=["status"],
    )


def plots_section(frame: pd.DataFrame, series: str = "build") -> str:
    pngs = plots.all_plots(frame, series=series)
    if not pngs:
        return "<h2>Plots</h2><p>No rows to plot.</p>"
    alts = {
        "busbw": "bus bandwidth against size, one line per build",
        "copy": "copy bandwidth against size",
        "tokens": "tokens per second",
    }
    return "<h2>Plots</h2>" + "".join(f"<div>{_img(k, v, alts[k])}</div>" for k, v in pngs.items())


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else "-"


def _cell_class(label: str) -> str:
    if label == "X":
        return "self"
    if label.startswith("NV"):
        return "nv"
    if label in ("PIX", "PXB", "PHB"):
        return "pcie"
    return "sys"


def topology_section(
    topology: Topology | Mapping[str, Any] | None, source: str | None = None
) -> str:
    topo = as_topology(topology)
    if topo is None:
        return "<h2>Topology</h2><p>No topology recorded (gpulane topo --json; report --topology FILE).</p>"
    names = topo.gpu_names() + [n.name for n in topo.nics]
    head = "".join(f"<th>{_e(n)}</th>" for n in names)
    body = []
    for a in names:
        cells = []
        for b in names:
            pair = topo.pair(a, b)
            label = "X" if a == b else (pair.label if pair is not None else "")
            cells.append(f'<td class="{_cell_class(label) if label else ""}">{_e(label)}</td>')
        body.append(f'<tr><th class="l">{_e(a)}</th>{"".join(cells)}</tr>')
    matrix = f'<table id="topology-matrix"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    rows = []
    for g in topo.gpus:
        link = g.pcie
        rows.append(
            {
                "GPU": g.name,
                "model": g.model or "-",
                "bus id": g.bus_id or "-",
                "NUMA": "-" if g.numa is None else g.numa,
                "CPU affinity": g.cpu_affinity or "-",
                "PCIe now": link.describe() if link else "-",
                "PCIe max": link.describe_max() if link else "-",
                "downtrained": _yes_no(link.downtrained) if link else "-",
            }
        )
    gpu_table = (
        html_table(
            pd.DataFrame(rows), "topology-gpus", left=["GPU", "model", "bus id", "CPU affinity"]
        )
        if rows
        else ""
    )
    p2p_rows = [
        {
            "pair": f"{p.a}-{p.b}",
            "label": p.label,
            "P2P": ", ".join(f"{k}={v}" for k, v in sorted(p.p2p.items())),
        }
        for p in topo.pairs
        if p.p2p
    ]
    p2p = (
        html_table(pd.DataFrame(p2p_rows), "topology-p2p", left=["pair", "label", "P2P"])
        if p2p_rows
        else ""
    )
    warnings = topo.warnings
    warn = (
        '<ul class="warn" id="topology-warnings">'
        + "".join(f"<li>{_e(w)}</li>" for w in warnings)
        + "</ul>"
        if warnings
        else '<p id="topology-warnings">No topology warnings.</p>'
    )
    src = f'<p class="meta">from {_e(source)}</p>' if source else ""
    return "<h2>Topology</h2>" + src + matrix + gpu_table + p2p + warn


def _collective_table(frame: pd.DataFrame) -> str:
    rows = frame[(frame["kind"] == "collective") & (frame["status"] == "ok")].dropna(
        subset=["size_bytes", "busbw_gbps"]
    )
    if rows.empty:
        return ""
    rows = rows.assign(series=rows["op"].astype(str) + " " + rows["build"].astype(str))
    busbw = rows.pivot_table(
        index="size_bytes", columns="series", values="busbw_gbps", aggfunc="median"
    )
    time = rows.pivot_table(
        index="size_bytes", columns="series", values="time_us", aggfunc="median"
    )
    out = pd.DataFrame({"size": [format_size(int(s)) for s in busbw.index]})
    for col in busbw.columns:
        out[f"{col} busbw GB/s"] = [_num(v) for v in busbw[col]]
        if col in time.columns:
            out[f"{col} time us"] = [_num(v) for v in time[col].reindex(busbw.index)]
    return "<h3>Collectives (median of variants)</h3>" + html_table(
        out, "table-collective", left=["size"]
    )


def _copy_table(frame: pd.DataFrame) -> str:
    rows = frame[(frame["kind"] == "copy") & (frame["status"] == "ok")]
    if rows.empty:
        return ""
    out = pd.DataFrame(
        {
            "build": rows["build"].astype(str),
            "op": rows["op"].astype(str),
            "memory": rows["memory"].fillna("-").astype(str),
            "src": rows["src"].fillna("-").astype(str),
            "dst": rows["dst"].fillna("-").astype(str),
            "size": [format_size(int(s)) if pd.notna(s) else "-" for s in rows["size_bytes"]],
            "GB/s": [_num(v) for v in rows["algbw_gbps"]],
            "expected GB/s": [_num(v) for v in rows["expected_gbps"]],
            "efficiency": [_num(v, 3) for v in rows["efficiency"]],
            "path": rows["path"].fillna("-").astype(str),
        }
    )
    return "<h3>Copies</h3>" + html_table(
        out, "table-copy", left=["build", "op", "memory", "src", "dst", "path"]
    )


def _tokens_table(frame: pd.DataFrame) -> str:
    rows = frame[(frame["kind"] == "tokens") & (frame["status"] == "ok")]
    if rows.empty:
        return ""
    out = pd.DataFrame(
        {
            "build": rows["build"].astype(str),
            "figure": rows["figure"].astype(str),
            "tokens/s": [_num(v) for v in rows["tokens_per_s"]],
            "TTFT ms": [_num(v) for v in rows["ttft_ms"]],
            "ITL p50 ms": [_num(v) for v in rows["itl_ms_p50"]],
            "comm share": [_num(v, 3) for v in rows["comm_share"]],
        }
    )
    return "<h3>Token rates</h3>" + html_table(out, "table-tokens", left=["build", "figure"])


def _errors_table(frame: pd.DataFrame) -> str:
    rows = frame[frame["status"] != "ok"]
    if rows.empty:
        return ""
    out = pd.DataFrame(
        {
            "run": rows["run_id"].astype(str),
            "kind": rows["kind"].astype(str),
            "op": rows["op"].astype(str),
            "status": rows["status"].astype(str),
            "error": rows["error"].fillna("").astype(str),
        }
    )
    return "<h3>Errors</h3>" + html_table(out, "table-errors", left=list(out.columns))


def render_report(
    frame: pd.DataFrame,
    topology: Topology | Mapping[str, Any] | None = None,
    verdict: Verdict | None = None,
    title: str = "gpulane report",
    sources: Sequence[str] = (),
    topology_source: str | None = None,
    rule_set: str | None = None,
) -> str:
    """The whole report as one HTML string."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">gpulane {_e(__version__)}, generated {_e(utc_now())}</p>',
    ]
    if verdict is not None:
        parts.append(verdict_section(verdict, rule_set))
    parts.append(summary_section(frame, sources))
    parts.append(plots_section(frame))
    parts.append(topology_section(topology, topology_source))
    tables = (
        _collective_table(frame) + _copy_table(frame) + _tokens_table(frame) + _errors_table(frame)
    )
    parts.append("<h2>Tables</h2>" + (tables or "<p>No rows.</p>"))
    parts.append("</body></html>")
    return "\n".join(parts)
