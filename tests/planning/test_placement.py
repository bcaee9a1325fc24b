"""TP groups on the fast paths, and the what-if topologies."""

from __future__ import annotations

import json

import pytest

from gpulane.errors import InputError
from gpulane.planning.placement import apply_what_if, place
from gpulane.topology.model import Topology
from tests.conftest import fixture_path
from tests.planning.common import box, no_topology


def test_tp_groups_go_on_the_nvlink_pairs() -> None:
    """GPU0-GPU2 and GPU1-GPU3 bonded by NVLink, the rest over Gen3 x4 through the CPUs."""
    topo = box(4, {(0, 2), (1, 3)}, 3, 4)
    placement = place(topo, 4, 2, 2)
    assert set(placement.groups) == {("GPU0", "GPU2"), ("GPU1", "GPU3")}
    assert placement.tp_label == "NV18" and placement.pp_label == "SYS"
    assert place(topo, 4, 4, 1).tp_label == "SYS"
    with pytest.raises(InputError, match="gpus=8 but the topology has 4 GPUs"):
        place(topo, 8, 4, 2)


def test_topology_of_the_h200_box() -> None:
    topo = Topology.from_json(json.loads(fixture_path("advise/topology-h200x2.json").read_text()))
    placement = place(topo, 2, 2, 1)
    assert placement.tp_label == "NV18" and placement.tp_gbps == pytest.approx(478, rel=0.01)


def test_what_if_spec_errors() -> None:
    with pytest.raises(InputError, match="pcie:GENxWIDTH"):
        apply_what_if(no_topology(2), "risers")
    with pytest.raises(InputError, match="Gen9"):
        apply_what_if(no_topology(2), "pcie:9x4")
    topo, _ = apply_what_if(no_topology(4), "nvlink:18")
    assert {p.label for p in topo.pairs} == {"NV18"} and len(topo.pairs) == 6
