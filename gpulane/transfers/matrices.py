"""Readable output of a copy run, in the shapes users know.

- Host <-> GPU: one table per GPU, a line per size, columns h2d / d2h / both for each kind
  of host memory (``both`` is the sum of the two directions run at once), as bandwidthTest's
  shmoo mode would print them side by side.
- GPU <-> GPU: p2pBandwidthLatencyTest's matrices with its exact headings (so that
  ``gpulane parse p2p`` reads them back): unidirectional and bidirectional bandwidth with
  peer access disabled and enabled (bidirectional as the sum of both directions, as that
  tool prints it), then the latency matrices. The diagonal (a GPU to itself) is not
  measured and prints as N/A.

All functions take rows (:class:`Row`, as measured or read back).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from gpulane.record import Row
from gpulane.units import format_size


def _gpu_num(name: str | None) -> int:
    m = re.search(r"(\d+)$", name or "")
    return int(m.group(1)) if m else -1


def _is_plain(r: Row) -> bool:
    extra = r.extra or {}
    return r.status in ("ok", "wrong") and not extra.get("test")


def _fmt(value: float | None, width: int = 8) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:{width}.2f}"


def host_table(rows: Iterable[Row], gpu: str) -> str:
    """Per-size table of one GPU's host copies."""
    mine = [r for r in rows if _is_plain(r) and r.op in ("h2d", "d2h") and gpu in (r.src, r.dst)]
    if not mine:
        return f"# {gpu}: no host copies measured"
    kinds = [k for k in ("pageable", "pinned", "pinned-wc") if any(r.memory == k for r in mine)]
    sizes = sorted({r.size_bytes or 0 for r in mine})  # every copy point has a size
    cell: dict[tuple[Any, ...], float | None] = {}
    for r in mine:
        cell[(r.memory, r.size_bytes, r.op, bool(r.bidirectional))] = r.algbw_gbps
    any_row = mine[0]
    extra = any_row.extra or {}
    head = f"# Host <-> {gpu}"
    if extra.get("gpu_model"):
        head += f" ({extra['gpu_model']})"
    link = next(((r.extra or {}).get("link") for r in mine if r.expected_gbps), None)
    expected = next((r.expected_gbps for r in mine if r.expected_gbps), None)
    if link and expected:
        head += f", {link}: {expected:.2f} GB/s per direction"
    if extra.get("numa_node") is not None:
        head += f", host memory on NUMA node {extra['numa_node']}"
        if extra.get("gpu_numa") is not None and extra["gpu_numa"] != extra["numa_node"]:
            head += f" (GPU on node {extra['gpu_numa']})"
    group_w = 3 * 9
    lines = [head]
    lines.append("#" + " " * 11 + "".join(f" | {k:^{group_w}}" for k in kinds))
    lines.append(
        "#" + f"{'size':>11}" + "".join(f" | {'h2d':>8} {'d2h':>8} {'both':>8} " for _ in kinds)
    )
    for size in sizes:
        parts = [f"{format_size(size):>12}"]
        for k in kinds:
            h2d = cell.get((k, size, "h2d", False))
            d2h = cell.get((k, size, "d2h", False))
            bh = cell.get((k, size, "h2d", True))
            bd = cell.get((k, size, "d2h", True))
            both = None if bh is None or bd is None else bh + bd
            parts.append(f" | {_fmt(h2d)} {_fmt(d2h)} {_fmt(both)} ")
        lines.append("".join(parts))
    lines.append("#" + " " * 11 + "   (GB/s; both = h2d + d2h running at once)")
    top = max(sizes)
    effs = []
    for k in kinds:
        for op in ("h2d", "d2h"):
            found: Row | None = next(
                (
                    x
                    for x in mine
                    if x.memory == k and x.size_bytes == top and x.op == op and not x.bidirectional
                ),
                None,
            )
            if found is not None and found.efficiency is not None:
                effs.append(f"{k} {op} {found.efficiency:.2f}")
    if effs:
        lines.append(f"# efficiency at {format_size(top)}: " + ", ".join(effs))
    return "\n".join(lines)


def _matrix(
    title: str, corner: str, names: Sequence[Any], values: dict[tuple[Any, Any], Any]
) -> list[str]:
    nums = [_gpu_num(n) for n in names]
    lines = [title, f"   {corner:>3}" + "".join(f" {n:>6}" for n in nums)]
    for a, na in zip(names, nums, strict=True):
        cells = []
        for b in names:
            v = values.get((a, b))
            cells.append(f" {'N/A':>6}" if v is None else f" {v:6.2f}")
        lines.append(f"   {na:>3}" + "".join(cells))
    return lines


def p2p_matrices(rows: Iterable[Row], size: int | None = None) -> str:
    """p2pBandwidthLatencyTest-style matrices at ``size`` (default: the largest measured)."""
    p2p = [r for r in rows if r.op == "p2p" and r.status in ("ok", "wrong")]
    bw = [r for r in p2p if not (r.extra or {}).get("test")]
    lat = [r for r in p2p if (r.extra or {}).get("test") == "latency"]
    if not bw and not lat:
        return "# no GPU <-> GPU copies measured"
    names = sorted({r.src for r in p2p} | {r.dst for r in p2p}, key=_gpu_num)
    if size is None and bw:
        size = max(r.size_bytes or 0 for r in bw)
    lines: list[str] = []
    if bw:
        lines.append(f"# GPU <-> GPU copies of {format_size(size or 0)}")
    for bidir in (False, True):
        for peer in (False, True):
            sel = [
                r
                for r in bw
                if r.size_bytes == size
                and bool(r.bidirectional) == bidir
                and bool(r.peer_access) == peer
            ]
            if not sel:
                continue
            values: dict[tuple[Any, Any], Any] = {}
            for r in sel:
                values[(r.src, r.dst)] = r.algbw_gbps
            if bidir:
                # p2pBandwidthLatencyTest prints the sum of both directions.
                values = {
                    (a, b): v + values[(b, a)] for (a, b), v in values.items() if (b, a) in values
                }
            state = "Enabled" if peer else "Disabled"
            kind = "Bidirectional" if bidir else "Unidirectional"
            writes = " (P2P Writes)" if peer and not bidir else ""
            lines += _matrix(
                f"{kind} P2P={state} Bandwidth{writes} Matrix (GB/s)", "D\\D", names, values
            )
    for peer in (False, True):
        sel = [r for r in lat if bool(r.peer_access) == peer]
        if not sel:
            continue
        values = {(r.src, r.dst): r.time_us for r in sel}
        state = "Enabled" if peer else "Disabled"
        writes = " (P2P Writes)" if peer else ""
        lat_size = sel[0].size_bytes
        lines += _matrix(f"P2P={state} Latency{writes} Matrix (us)", "GPU", names, values)
        lines.append(f"#   (device time per copy of {lat_size} B)")
    eff = []
    for r in sorted(bw, key=lambda x: (_gpu_num(x.src), _gpu_num(x.dst))):
        if (
            r.size_bytes == size
            and not r.bidirectional
            and r.peer_access
            and r.efficiency is not None
        ):
            link = (r.extra or {}).get("link") or "link"
            eff.append(
                f"# {r.src} -> {r.dst}: {r.algbw_gbps:.2f} GB/s of {link} "
                f"{r.expected_gbps:.2f} GB/s = {r.efficiency:.2f}"
            )
    lines += eff
    return "\n".join(lines)


def aggregate_table(rows: Iterable[Row]) -> str:
    """All GPUs copying to or from the host at once."""
    agg = [r for r in rows if (r.extra or {}).get("test") == "all-gpus"]
    if not agg:
        return ""
    lines = []
    for op in ("h2d", "d2h"):
        per = [r for r in agg if r.op == op and not r.extra.get("aggregate")]
        tot = [r for r in agg if r.op == op and r.extra.get("aggregate")]
        if not per:
            continue
        per.sort(key=lambda r: _gpu_num(r.dst if op == "h2d" else r.src))
        size = per[0].size_bytes
        items = "  ".join(f"{r.dst if op == 'h2d' else r.src} {r.algbw_gbps:.2f}" for r in per)
        line = f"# all GPUs at once, {op}, {per[0].memory}, {format_size(size or 0)} each: {items}"
        if tot:
            t = tot[0]
            line += f"  total {t.algbw_gbps:.2f} GB/s"
            if t.expected_gbps:
                line += f" of {t.expected_gbps:.2f} ({t.efficiency:.2f})"
        lines.append(line)
    return "\n".join(lines)
