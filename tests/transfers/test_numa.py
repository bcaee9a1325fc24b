from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpulane.errors import InputError
from gpulane.transfers.numa import (
    choose_node,
    gpu_numa_node,
    node_cpus,
    on_node,
    online_nodes,
    parse_cpulist,
    sysfs_bus_id,
)


def test_parse_cpulist() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpulist("") == set()


def test_sysfs_bus_id() -> None:
    assert sysfs_bus_id("00000000:19:00.0") == "0000:19:00.0"
    assert sysfs_bus_id("0000:9A:00.0") == "0000:9a:00.0"


def _fake_sys(tmp_path: Path) -> tuple[Path, Path]:
    nodes = tmp_path / "node"
    for n, cpus in ((0, "0-15"), (1, "16-31")):
        (nodes / f"node{n}").mkdir(parents=True)
        (nodes / f"node{n}" / "cpulist").write_text(cpus + "\n")
    (nodes / "online").write_text("0-1\n")
    pci = tmp_path / "pci"
    for bus, node in (("0000:19:00.0", "1"), ("0000:3b:00.0", "-1")):
        (pci / bus).mkdir(parents=True)
        (pci / bus / "numa_node").write_text(node + "\n")
    return nodes, pci


def test_sysfs_reading(tmp_path: Path) -> None:
    nodes, pci = _fake_sys(tmp_path)
    assert online_nodes(nodes) == [0, 1]
    assert node_cpus(1, nodes) == set(range(16, 32))
    assert gpu_numa_node("00000000:19:00.0", pci) == 1
    assert gpu_numa_node("0000:3b:00.0", pci) is None  # -1: unknown
    assert gpu_numa_node("0000:99:00.0", pci) is None
    assert online_nodes(tmp_path / "missing") == [0]


def test_choose_node() -> None:
    assert choose_node("local", 1, [0, 1]) == 1
    assert choose_node("remote", 1, [0, 1]) == 0
    assert choose_node("none", 1, [0, 1]) is None
    assert choose_node(None, 1, [0, 1]) is None
    assert choose_node(1, 0, [0, 1]) == 1
    assert choose_node("local", None, [0]) is None
    with pytest.raises(InputError, match="one NUMA node"):
        choose_node("remote", 0, [0])
    with pytest.raises(InputError, match="not known"):
        choose_node("remote", None, [0, 1])
    with pytest.raises(InputError, match="not online"):
        choose_node(3, 0, [0, 1])
    with pytest.raises(InputError, match="expected local"):
        choose_node("far", 0, [0, 1])


def test_on_node_moves_this_thread_and_back() -> None:
    before = os.sched_getaffinity(0)
    with on_node(None) as moved:
        assert moved is False
    nodes = online_nodes()
    with on_node(nodes[0]) as moved:
        if moved:
            assert os.sched_getaffinity(0) <= before
    assert os.sched_getaffinity(0) == before
