"""`gpulane trace` in the terminal: what was read, each trace's copies and totals, and
traces side by side.

Every figure shown comes from the Summary or the Trace; this module only formats. A
direction or link that was inferred carries a ``*`` and the rule that inferred it is
printed under the table, so a guess is never shown as a reading.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from gpulane.analysis.trace.diff import Change
from gpulane.analysis.trace.events import ON_DEVICE, PCIE, CopyEvent, Trace
from gpulane.analysis.trace.summary import Summary
from gpulane.units import format_size


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _us(value: float | None) -> str:
    """Microseconds as a short human time."""
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f} s"
    if value >= 1e3:
        return f"{value / 1e3:.2f} ms"
    return f"{value:.1f} us"


def _bytes(n: int | None) -> str:
    return "?" if n is None else format_size(int(n))


def _blocking(c: CopyEvent) -> str:
    if c.blocking is None:
        return "?"
    return "blocking" if c.blocking else "async"


def _direction(c: CopyEvent) -> str:
    return c.direction + ("*" if c.direction_inferred else "")


def _link(c: CopyEvent) -> str:
    return c.link + ("*" if c.link_inferred else "")


def read_line(trace: Trace) -> str:
    i = trace.info
    state = "complete" if i.complete else ("TRUNCATED" if i.truncated else "partly damaged")
    return (
        f"{i.path} ({i.format}): {i.events_read} events from {format_size(i.bytes_read)} "
        f"of {'decompressed ' if i.path.endswith('.gz') else ''}data, "
        f"file {format_size(i.size_bytes)}; {state}"
    )


def render_trace(console: Console, trace: Trace, summary: Summary, max_copies: int = 20) -> None:
    """One trace: what was read, its copies, totals by link and direction, histogram."""
    console.print(f"[bold]{trace.label}[/bold]  " + read_line(trace))
    for w in trace.info.warnings:
        console.print(f"  [yellow]warning:[/yellow] {w}")
    if not trace.copies:
        console.print("  no copies found in this trace")
        return
    t0 = min(
        [c.start_us for c in trace.copies] + [k.start_us for k in trace.kernels],
        default=0.0,
    )
    shown = trace.copies[:max_copies] if max_copies > 0 else trace.copies
    table = Table(title=f"copies ({len(shown)} of {len(trace.copies)})", title_justify="left")
    for name, justify in (
        ("start", "right"),
        ("dir", "left"),
        ("link", "left"),
        ("bytes", "right"),
        ("time", "right"),
        ("GB/s", "right"),
        ("host", "left"),
        ("waited", "right"),
        ("stream", "right"),
        ("memory", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for c in shown:
        mem = "->".join(m for m in (c.src_memory, c.dst_memory) if m) or "-"
        table.add_row(
            _us(c.start_us - t0),
            _direction(c),
            _link(c),
            _bytes(c.bytes),
            _us(c.dur_us),
            _f(c.gbps),
            _blocking(c),
            _us(c.host_us) if c.blocking else "-",
            "-" if c.stream is None else str(c.stream),
            mem,
        )
    console.print(table)
    if any(c.direction_inferred or c.link_inferred for c in trace.copies):
        console.print("  * inferred: " + (summary.rule or "no GPU memcpy event to read it from"))

    line = summary.line_rate_gbps
    totals = Table(title="totals", title_justify="left")
    for name in (
        "by",
        "copies",
        "bytes",
        "copy time",
        "GB/s (weighted)",
        "of line rate",
        "blocking",
        "blocked",
    ):
        totals.add_column(name, justify="left" if name == "by" else "right")
    for label, groups in (("link", summary.by_link), ("dir", summary.by_direction)):
        for key, g in sorted(groups.items()):
            of_line = g.gbps / line if g.gbps and line and key in (PCIE, "H2D", "D2H") else None
            totals.add_row(
                f"{label} {key}",
                str(g.count),
                _bytes(g.bytes),
                _us(g.time_us),
                _f(g.gbps),
                _pct(of_line),
                str(g.blocking_count),
                _us(g.blocking_us),
            )
    totals.add_row(
        "all",
        str(summary.copies),
        _bytes(summary.bytes),
        _us(summary.copy_time_us),
        _f(summary.gbps),
        "",
        str(summary.blocking_count),
        _us(summary.blocking_us),
        style="bold",
    )
    console.print(totals)

    hist = Table(title="bandwidth histogram (GB/s)", title_justify="left")
    for name in ("GB/s", "copies", "bytes", "time", "share of time"):
        hist.add_column(name, justify="right")
    total_time = sum(b.time_us for b in summary.histogram) or 1.0
    for b in summary.histogram:
        if b.count == 0:
            continue
        hist.add_row(
            b.label, str(b.count), _bytes(b.bytes), _us(b.time_us), _pct(b.time_us / total_time)
        )
    console.print(hist)
    for text in summary_lines(summary):
        console.print("  " + text)


def summary_lines(s: Summary) -> list[str]:
    out = []
    if s.pcie_gbps is not None:
        if s.line_rate_gbps:
            out.append(
                f"PCIe copies: {s.pcie_gbps:.2f} GB/s weighted average, "
                f"{_pct(s.pcie_efficiency)} of the {s.line_rate_gbps:.1f} GB/s line rate "
                f"({s.line_rate_source})"
            )
        else:
            out.append(
                f"PCIe copies: {s.pcie_gbps:.2f} GB/s weighted average (line rate unknown: "
                f"give --line-rate-gbps)"
            )
    if ON_DEVICE in s.by_link:
        out.append(f"on-device copies: {_f(s.by_link[ON_DEVICE].gbps)} GB/s weighted average")
    out.append(
        f"host blocked on copies: {_us(s.blocking_us)} in {s.blocking_count} copies; "
        f"{s.async_count} asynchronous"
        + (f", {s.unknown_blocking} unknown" if s.unknown_blocking else "")
        + (f"; copies on stream(s) {', '.join(s.streams)}" if s.streams else "")
    )
    if s.overlap_fraction is not None:
        out.append(
            f"copies overlapped with kernels: {_pct(s.overlap_fraction)} of copy time "
            f"({_us(s.overlap_us)} of {_us(s.copy_busy_us)}); kernels busy {_us(s.kernel_busy_us)}"
        )
    elif s.kernels == 0:
        out.append("overlap with kernels: unknown (no GPU kernel events in this trace)")
    out.append(f"trace span {_us(s.span_us)}; copies busy {_us(s.copy_busy_us)}")
    return out


def _value(change_key: str, v: float | None) -> str:
    if v is None:
        return "-"
    if change_key.endswith("_us"):
        return _us(v)
    if change_key == "bytes":
        return format_size(int(v))
    if change_key in ("pcie_efficiency", "overlap_fraction"):
        return _pct(v)
    if change_key.endswith("count") or change_key == "copies":
        return f"{int(v)}"
    return _f(v)


def render_comparison(
    console: Console, summaries: Sequence[Summary], changes: Sequence[Sequence[Change]]
) -> None:
    """Side by side: the first trace, then each other with its change from the first."""
    table = Table(title="side by side", title_justify="left")
    table.add_column("metric")
    table.add_column(summaries[0].label, justify="right")
    for s in summaries[1:]:
        table.add_column(s.label, justify="right")
        table.add_column("change", justify="right")
    for i, first in enumerate(changes[0]):
        cells = [first.label, _value(first.key, first.before)]
        for per in changes:
            ch = per[i]
            cells.append(_value(ch.key, ch.after))
            cells.append(_change_text(ch))
        table.add_row(*cells)
    console.print(table)


def _change_text(ch: Change) -> str:
    if ch.delta is None or abs(ch.delta) < 1e-12:
        return ""
    if ch.key in ("pcie_efficiency", "overlap_fraction"):
        text = f"{ch.delta * 100:+.0f} pts"
    elif ch.ratio is not None and ch.ratio > 0:
        text = f"x{ch.ratio:.2f}"
    elif ch.key.endswith("_us"):
        text = ("+" if ch.delta > 0 else "-") + _us(abs(ch.delta))
    elif ch.key.endswith("count") or ch.key == "copies":
        text = f"{int(ch.delta):+d}"
    else:
        text = f"{ch.delta:+,.2f}"
    if ch.better is True:
        return f"[green]{text}[/green]"
    if ch.better is False:
        return f"[red]{text}[/red]"
    return text
