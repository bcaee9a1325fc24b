"""The terminal view: the path matrix, PCIe links, P2P status, warnings."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from gpulane.topology import bandwidth
from gpulane.topology.model import Topology

_STYLE = {
    "nvlink": "bold green",
    "pix": "green",
    "pxb": "cyan",
    "phb": "yellow",
    "node": "yellow",
    "sys": "red",
}


def _cell(topo: Topology, a: str, b: str) -> str:
    if a == b:
        return "X"
    p = topo.pair(a, b)
    if p is None or not p.label:
        return ""
    text = p.label if p.original is None else f"{p.label} ({p.original})"
    return f"[{_STYLE.get(p.kind, '')}]{text}[/]" if p.kind in _STYLE else text


def _plain(topo: Topology, a: str, b: str) -> str:
    p = topo.pair(a, b)
    if a == b or p is None or not p.label:
        return "X" if a == b else ""
    return p.label if p.original is None else f"{p.label} ({p.original})"


def _width(topo: Topology, rows: list[str], cols: list[str]) -> int:
    """The characters a matrix of these rows and columns takes, borders included: each
    column as wide as its name or its widest cell, plus rich's padding and rule."""
    first = max(len(r) for r in rows) + 3
    return 1 + first + sum(max(len(c), *(len(_plain(topo, r, c)) for r in rows)) + 3 for c in cols)


def _matrix(topo: Topology, title: str, rows: list[str], cols: list[str]) -> Table:
    t = Table(title=title)
    t.add_column("", no_wrap=True)
    for n in cols:
        t.add_column(n, justify="center", no_wrap=True)
    for a in rows:
        t.add_row(a, *(_cell(topo, a, b) for b in cols))
    return t


def _paths(topo: Topology, console: Console) -> None:
    """The path matrix; one wider than the terminal (8 GPUs and 17 NICs) would cut every
    name to "GP…", so it is shown as GPU-GPU and NIC-GPU matrices, NIC-NIC left out."""
    gpus = [g.name for g in topo.gpus]
    nics = [n.name for n in topo.nics]
    names = gpus + nics
    title = "Paths (as nvidia-smi topo -m labels them)"
    if _width(topo, names, names) <= console.width or not gpus or not nics:
        console.print(_matrix(topo, title, names, names))
        return
    console.print(_matrix(topo, "GPU-GPU paths (as nvidia-smi topo -m labels them)", gpus, gpus))
    console.print(_matrix(topo, "NIC-GPU paths", nics, gpus))
    console.print(
        f"[dim]note:[/] the full {len(names)}x{len(names)} matrix is wider than the terminal "
        f"({console.width} columns): NIC-NIC paths are left out here; "
        "`gpulane topo --json` holds every pair",
        highlight=False,
    )


def render(topo: Topology, console: Console | None = None) -> None:
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 160))
    names = [g.name for g in topo.gpus] + [n.name for n in topo.nics]
    if topo.pairs and names:
        _paths(topo, console)

    if topo.gpus:
        t = Table(title="GPUs")
        for col in (
            "GPU",
            "bus id",
            "model",
            "CPU affinity",
            "NUMA",
            "PCIe now",
            "PCIe max",
            "narrowest upstream",
            "host GB/s",
            "NVLinks",
        ):
            t.add_column(col)
        for g in topo.gpus:
            link = g.pcie
            up = [u for u in g.upstream if u.width is not None]
            narrow = min(up, key=lambda u: u.width or 0) if up else None
            host = bandwidth.expected_host_gbps(topo, g.name)
            active = [v for v in g.nvlink_gbps.values() if v]
            nv = (
                f"{len(active)} × {min(active):.3f} GB/s"
                if active
                else ("none active" if g.nvlink_gbps else "")
            )
            now = link.describe() if link else "?"
            if link is not None and link.downtrained:
                now = f"[red]{now}[/]"
            t.add_row(
                g.name,
                g.bus_id or "?",
                g.model or "?",
                g.cpu_affinity or "?",
                "?" if g.numa is None else str(g.numa),
                now,
                link.describe_max() if link else "?",
                f"{narrow.describe()} at {narrow.bus_id}" if narrow else "",
                f"{host:.1f}" if host is not None else "?",
                nv,
            )
        console.print(t)

    if topo.nics:
        t = Table(title="NICs")
        t.add_column("NIC")
        t.add_column("device")
        for nic in topo.nics:
            t.add_row(nic.name, nic.device or "?")
        console.print(t)

    gpu_pairs = topo.gpu_pairs()
    if gpu_pairs:
        t = Table(title="GPU pairs")
        t.add_column("pair")
        t.add_column("label")
        t.add_column("expected GB/s (per direction)")
        for mode in topo.p2p_modes:
            t.add_column(f"P2P {mode}")
        for p in gpu_pairs:
            t.add_row(
                f"{p.a}-{p.b}",
                p.label or "?",
                f"{p.expected_gbps:.1f}" if p.expected_gbps is not None else "?",
                *[p.p2p.get(m, "") for m in topo.p2p_modes],
            )
        console.print(t)

    for w in topo.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    for m in topo.missing:
        console.print(f"[dim]missing:[/] {m}", highlight=False)
    if topo.sources:
        console.print(
            "[dim]sources: " + "; ".join(f"{k}: {v}" for k, v in topo.sources.items()) + "[/]",
            highlight=False,
        )
