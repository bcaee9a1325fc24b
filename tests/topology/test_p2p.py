from __future__ import annotations

import pytest

from gpulane.errors import ParseError
from gpulane.topology.p2p import mode_from_filename, parse_p2p
from tests.topology.helpers import H200, TOPO, tabs_to_spaces, text, to_crlf


@pytest.mark.parametrize(
    ("letter", "mode", "status"),
    [
        ("r", "read", "OK"),
        ("w", "write", "OK"),
        ("n", "nvlink", "OK"),
        ("a", "atomics", "OK"),
        ("p", "pcie", "NS"),
    ],
)
def test_h200x2_modes(letter: str, mode: str, status: str) -> None:
    name = f"{H200}/topo-p2p-{letter}.txt"
    assert mode_from_filename(name) == mode
    m = parse_p2p(text(name), name, mode_from_filename(name))
    assert m.mode == mode
    assert m.gpus == ["GPU0", "GPU1"]
    assert m.status == {("GPU0", "GPU1"): status, ("GPU1", "GPU0"): status}
    assert m.legend["CNS"] == "Chipset not supported"
    for variant in (tabs_to_spaces(text(name)), to_crlf(text(name))):
        assert parse_p2p(variant).status == m.status


def test_autodl_all_ns() -> None:
    name = f"{TOPO}/autodl_2x2080ti_p2p_p_NS.txt"
    assert mode_from_filename(name) == "pcie"
    m = parse_p2p(text(name))
    assert set(m.status.values()) == {"NS"}


def test_other_codes_kept() -> None:
    t = "\tGPU0\tGPU1\tGPU2\n GPU0\tX\tOK\tCNS\n GPU1\tOK\tX\tGNS\n GPU2\tCNS\tGNS\tX\n"
    m = parse_p2p(t.replace("GNS", "TNS", 1).replace("\tOK\tX", "\tU\tX"))
    assert m.status[("GPU0", "GPU2")] == "CNS"
    assert m.status[("GPU1", "GPU2")] == "TNS"
    assert m.status[("GPU1", "GPU0")] == "U"
    m = parse_p2p(t.replace("CNS", "IOH"))
    assert m.unknown_codes() == {"IOH"}


def test_errors() -> None:
    with pytest.raises(ParseError, match="topo -m"):
        parse_p2p(text(f"{H200}/topo-m.txt"), "x")
    with pytest.raises(ParseError, match="truncated") as e:
        parse_p2p(" \tGPU0\tGPU1\n GPU0\tX\tOK\n", "x")
    assert e.value.line == 3
    with pytest.raises(ParseError, match="empty"):
        parse_p2p("", "x")
    with pytest.raises(ParseError, match="not a P2P status"):
        parse_p2p(" \tGPU0\tGPU1\n GPU0\tX\tok!\n GPU1\tOK\tX\n", "x")
