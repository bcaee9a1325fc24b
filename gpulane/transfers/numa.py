"""Host memory placement: which NUMA node a GPU sits on, and pinning this thread to a node.

Pinned and pageable host buffers get their physical pages from the node of the CPU that
first touches them (Linux's default local policy): cudaHostAlloc touches and locks the pages
in the calling thread, a pageable buffer is touched when it is first filled. So the thread is
moved onto the node's CPUs with os.sched_setaffinity before a buffer is allocated and filled,
and stays there while that GPU is measured (pageable copies are staged through the driver's
buffers by this same thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpulane.errors import InputError

SYS_NODES = Path("/sys/devices/system/node")
SYS_PCI = Path("/sys/bus/pci/devices")


def parse_cpulist(text: str) -> set[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11}; empty text -> empty set."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        else:
            cpus.add(int(part))
    return cpus


def sysfs_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:19:00.0`` as sysfs names it: ``0000:19:00.0`` (lower case)."""
    bus_id = bus_id.strip().lower()
    domain, _, rest = bus_id.partition(":")
    if rest and len(domain) > 4:
        domain = domain[-4:]
    return f"{domain}:{rest}" if rest else bus_id


def gpu_numa_node(bus_id: str | None, root: Path = SYS_PCI) -> int | None:
    """The NUMA node of a PCI device from sysfs; None when unknown (-1 or no file)."""
    if not bus_id:
        return None
    try:
        value = int((root / sysfs_bus_id(bus_id) / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None


def node_cpus(node: int, root: Path = SYS_NODES) -> set[int]:
    try:
        return parse_cpulist((root / f"node{node}" / "cpulist").read_text())
    except OSError:
        return set()


def online_nodes(root: Path = SYS_NODES) -> list[int]:
    try:
        text = (root / "online").read_text()
    except OSError:
        return [0]
    return sorted(parse_cpulist(text)) or [0]


def choose_node(mode: str | int | None, gpu_node: int | None, nodes: list[int]) -> int | None:
    """The node to put host buffers on: ``local`` (the GPU's), ``remote`` (another one),
    ``none`` (no binding) or a node number."""
    text = "none" if mode is None else str(mode).strip().lower()
    if text in ("none", "off", "false", ""):
        return None
    if text == "local":
        return gpu_node
    if text == "remote":
        if gpu_node is None:
            raise InputError(
                "numa=remote: the GPU's NUMA node is not known on this host; "
                "name a node (numa=1) or use numa=local"
            )
        others = [n for n in nodes if n != gpu_node]
        if not others:
            raise InputError(
                f"numa=remote: this host has one NUMA node ({gpu_node}); there is no remote "
                "node to compare with"
            )
        return others[0]
    try:
        node = int(text)
    except ValueError:
        raise InputError(
            f"numa: expected local, remote, none or a node number, got {mode!r}"
        ) from None
    if node not in nodes:
        raise InputError(f"numa: node {node} is not online (online: {nodes})")
    return node


@contextmanager
def on_node(node: int | None, root: Path = SYS_NODES) -> Iterator[bool]:
    """Run the block on the CPUs of ``node`` (first-touch placement); yields whether it did."""
    if node is None or not hasattr(os, "sched_setaffinity"):
        yield False
        return
    cpus = node_cpus(node, root) & os.sched_getaffinity(0)
    if not cpus:
        yield False
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield True
    finally:
        os.sched_setaffinity(0, before)
