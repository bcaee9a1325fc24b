"""Bandwidth against size, one panel per direction, a line per GPU and host memory kind."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpulane.record import Row

PLOT_FILE = "copy-bandwidth.png"


def plot_bandwidth(rows: Iterable[Row], out: str | Path) -> Path | None:
    """Write a PNG of unidirectional host copies (pinned, pageable, write-combined)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[tuple[str, str | None, str], list[tuple[int, float]]] = {}
    for r in rows:
        extra = r.extra or {}
        if (
            r.kind != "copy"
            or r.op not in ("h2d", "d2h")
            or r.bidirectional
            or extra.get("test")
            or r.algbw_gbps is None
            or r.size_bytes is None
        ):
            continue
        gpu = r.dst if r.op == "h2d" else r.src
        series.setdefault((r.op, gpu, r.memory or "?"), []).append(
            (int(r.size_bytes), float(r.algbw_gbps))
        )
    if not series:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    styles = {"pinned": "-", "pageable": "--", "pinned-wc": ":"}
    for ax, op in zip(axes, ("h2d", "d2h"), strict=True):
        for (sop, gpu, memory), points in sorted(series.items()):
            if sop != op:
                continue
            points.sort()
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                styles.get(memory, "-"),
                marker=".",
                label=f"{gpu} {memory}",
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (bytes)")
        ax.set_title({"h2d": "host -> device", "d2h": "device -> host"}[op])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("GB/s (1e9 B/s)")
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
