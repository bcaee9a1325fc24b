"""Joining the sources into one Topology."""

from __future__ import annotations

from gpulane.topology.build import Inputs, build
from gpulane.topology.p2p import parse_p2p
from gpulane.topology.topo_matrix import parse_topo_matrix
from tests.topology.helpers import H200, text


def test_p2p_statuses_without_a_mode_are_warned_about() -> None:
    inp = Inputs(
        matrix=parse_topo_matrix(text(f"{H200}/topo-m.txt"), "m.txt"),
        p2p=[parse_p2p(text(f"{H200}/topo-p2p-r.txt"), "p2p.txt", None)],
    )
    topo = build(inp)
    assert topo.pairs[0].p2p == {"mode0": "OK"}
    assert topo.warnings == [
        "P2P statuses from p2p.txt have no mode (r, w, n, a or p): listed as mode0, which no "
        "acceptance rule checks"
    ]
