"""A row's path label and the line rate a rule holds it to, from the topology model."""

from __future__ import annotations

import dataclasses

import pytest

from gpulane.analysis.rules import expected_gbps, row_path
from gpulane.record import row_of
from gpulane.topology.model import Topology
from tests.analysis.fixture_rows import downtrained, h200_topology, pcie_topology


def test_expected_bandwidth_sources() -> None:
    h200 = Topology.from_json(h200_topology())
    row = row_of({"kind": "copy", "op": "h2d", "dst": "GPU0", "expected_gbps": 31.5})
    assert expected_gbps(row, None) == (31.5, "expected_gbps of the row")
    # 0 or NaN in the row is no figure: the topology decides.
    for given in (0.0, float("nan"), None):
        row = row_of({"kind": "copy", "op": "d2h", "src": "GPU1", "expected_gbps": given})
        rate, src = expected_gbps(row, h200)
        assert rate == pytest.approx(16 * 3.938) and src == "PCIe Gen5 x16"
    nv4 = row_of({"kind": "collective", "op": "all_reduce", "path": "NV4"})
    # The per-link rate is the topology's (nvidia-smi nvlink -s: 26.562 GB/s per link).
    assert expected_gbps(nv4, h200) == (
        pytest.approx(4 * 26.562),
        "NV4: 4 x 26.56 GB/s",
    )
    # No topology: no per-link rate, so no figure (it used to assume NVLink4's 26.5625).
    rate, why = expected_gbps(nv4, None)
    assert rate is None and "per-link NVLink rate unknown" in why
    assert expected_gbps(
        row_of({"kind": "collective", "op": "all_reduce", "path": "SYS"}), None
    ) == (
        None,
        "SYS: PCIe links of the GPUs not in the topology",
    )
    net = row_of({"kind": "collective", "op": "all_reduce", "path": "NET"})
    assert expected_gbps(net, h200) == (None, "no line rate for path NET")
    assert expected_gbps(row_of({"kind": "collective", "op": "all_reduce"}), None) == (
        None,
        "path unknown",
    )


def test_collective_path_and_rate_from_the_topology() -> None:
    """A row without a path gets the worst label among all GPUs; PCIe paths are held to the
    slowest GPU's link."""
    topo = Topology.from_json(downtrained(pcie_topology(gen=4, label="PXB"), "GPU1", 4, 8))
    row = row_of({"kind": "collective", "op": "all_reduce"})
    assert row_path(row, topo) == "PXB"
    rate, src = expected_gbps(row, topo)
    assert rate == pytest.approx(8 * 1.969)
    assert src == "PXB: slowest PCIe link of the GPUs, PCIe Gen4 x8"
    p2p = row_of({"kind": "copy", "op": "p2p", "src": "GPU1", "dst": "GPU0"})
    assert row_path(p2p, topo) == "PXB"
    assert expected_gbps(p2p, topo)[0] == pytest.approx(8 * 1.969)


def test_staged_peer_copies_are_held_to_the_host_links() -> None:
    """Peer access off: the copy goes through host memory, not over the NVLinks."""
    h200 = Topology.from_json(h200_topology())
    on = row_of({"kind": "copy", "op": "p2p", "src": "GPU0", "dst": "GPU1", "peer_access": True})
    off = dataclasses.replace(on, peer_access=False)
    assert expected_gbps(on, h200)[0] == pytest.approx(18 * 26.562)
    assert expected_gbps(off, h200) == (
        pytest.approx(16 * 3.938),
        "PCIe Gen5 x16 (staged through host)",
    )


def test_idle_link_is_held_to_the_generation_it_reaches() -> None:
    """An idle GPU reads Gen1: the line rate is the link's Gen5, not Gen1 (the rules used
    the speed as read, which made an idle machine's copies look 16x too efficient)."""
    data = h200_topology()
    data["gpus"][0]["pcie"].update(gen=1, downtrained=True)
    rate, src = expected_gbps(
        row_of({"kind": "copy", "op": "h2d", "dst": "GPU0"}), Topology.from_json(data)
    )
    assert rate == pytest.approx(16 * 3.938) and src == "PCIe Gen5 x16"
