"""`gpulane trace --plot`: the bandwidth histogram of all traces, and a timeline per trace.

matplotlib is imported only when a plot is asked for (it takes a second to load), and
with the Agg backend, since the command runs on servers without a display.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpulane.analysis.trace.events import ON_DEVICE, PCIE, Trace
from gpulane.analysis.trace.summary import Summary


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: str | Path) -> Path:
    """Lay out, write the PNG (making its folder) and free the figure."""
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_histogram(summaries: Sequence[Summary], path: str | Path) -> Path:
    """Bandwidth histogram by count, bytes and time; traces side by side per bin."""
    plt = _plt()
    labels = [b.label for b in summaries[0].histogram]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    n = len(summaries)
    width = 0.8 / n
    for ax, (what, get) in zip(
        axes,
        (
            ("copies", lambda b: b.count),
            ("bytes (GiB)", lambda b: b.bytes / 2**30),
            ("time (ms)", lambda b: b.time_us / 1e3),
        ),
        strict=True,
    ):
        for i, s in enumerate(summaries):
            xs = [j + (i - (n - 1) / 2) * width for j in range(len(labels))]
            ax.bar(xs, [get(b) for b in s.histogram], width=width, label=s.label)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30)
        ax.set_xlabel("effective bandwidth (GB/s)")
        ax.set_ylabel(what)
        ax.grid(axis="y", alpha=0.3)
    line = next((s.line_rate_gbps for s in summaries if s.line_rate_gbps), None)
    title = "copy bandwidth"
    if line:
        title += f" (PCIe line rate {line:.1f} GB/s)"
    fig.suptitle(title)
    axes[0].legend(fontsize=8)
    return _save(plt, fig, path)


def plot_timeline(trace: Trace, path: str | Path, max_items: int = 20000) -> Path:
    """A strip per stream: copies (by link, hatched when the host blocked) against kernels."""
    plt = _plt()
    t0 = min([c.start_us for c in trace.copies] + [k.start_us for k in trace.kernels], default=0.0)
    lanes: dict[str, list[tuple[float, float, str, str | None]]] = {}
    colors = {PCIE: "tab:orange", ON_DEVICE: "tab:purple", "peer": "tab:green", "host": "tab:gray"}
    for c in trace.copies[:max_items]:
        dev = "" if c.device is None else f"GPU{c.device} "
        lane = f"{dev}copies s{c.stream}" if c.stream is not None else "copies (host)"
        lanes.setdefault(lane, []).append(
            (
                (c.start_us - t0) / 1e3,
                c.dur_us / 1e3,
                colors.get(c.link, "tab:orange"),
                "//" if c.blocking else None,
            )
        )
    for k in trace.kernels[:max_items]:
        dev = "" if k.device is None else f"GPU{k.device} "
        lane = f"{dev}kernels s{k.stream}"
        lanes.setdefault(lane, []).append(
            ((k.start_us - t0) / 1e3, k.dur_us / 1e3, "tab:blue", None)
        )
    names = sorted(lanes, key=lambda n: ("kernels" in n, n))
    fig, ax = plt.subplots(figsize=(14, 1.2 + 0.6 * max(1, len(names))))
    for y, name in enumerate(names):
        items = lanes[name]
        plain = [(s, d) for s, d, col, h in items if h is None]
        hatched = [(s, d) for s, d, col, h in items if h is not None]
        cols = [col for s, d, col, h in items if h is None]
        if plain:
            ax.broken_barh(
                plain, (y - 0.35, 0.7), facecolors=cols, edgecolor="white", linewidth=0.4
            )
        if hatched:
            hcols = [col for s, d, col, h in items if h is not None]
            ax.broken_barh(
                hatched,
                (y - 0.35, 0.7),
                facecolors=hcols,
                hatch="//",
                edgecolor="black",
                linewidth=0.3,
            )
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.set_xlabel("time (ms)")
    ax.set_title(
        f"{trace.label}: copies (orange PCIe, purple on-device, green peer; hatched: host blocked) "
        f"and kernels (blue)",
        fontsize=9,
    )
    ax.grid(axis="x", alpha=0.3)
    return _save(plt, fig, path)
