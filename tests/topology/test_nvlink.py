from __future__ import annotations

import pytest

from gpulane.errors import ParseError
from gpulane.topology.nvlink import parse_nvlink_status
from tests.topology.helpers import H200, text


def test_h200x2() -> None:
    gpus = parse_nvlink_status(text(f"{H200}/nvlink-s.txt"))
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[0].model == "NVIDIA H200"
    assert len(gpus[0].active()) == 18
    assert set(gpus[1].links.values()) == {26.562}


def test_inactive_links() -> None:
    t = "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-x)\n\t Link 0: 25.781 GB/s\n\t Link 1: <inactive>\n"
    g = parse_nvlink_status(t)[0]
    assert g.links == {0: 25.781, 1: None}


def test_errors() -> None:
    with pytest.raises(ParseError, match="not like"):
        parse_nvlink_status("GPU 0: X (UUID: GPU-1)\n\t Link 0: fast\n", "f")
    with pytest.raises(ParseError, match="topo -m") as e:
        parse_nvlink_status(text(f"{H200}/topo-m.txt"), "f")
    assert e.value.line == 1
