"""Pasted files holding several nvidia-smi captures, split into their matrices."""

from __future__ import annotations

from gpulane.textio import clean_lines
from gpulane.topology.captures import TOPO_M, TOPO_P2P, split_captures
from gpulane.topology.p2p import parse_p2p
from gpulane.topology.topo_matrix import parse_topo_matrix
from tests.topology.helpers import H200, TOPO, text


def test_split_keeps_kinds_modes_and_line_numbers() -> None:
    pasted = (
        "user@host:~$ nvidia-smi topo -m\n"
        + text(f"{H200}/topo-m.txt")
        + "user@host:~$ nvidia-smi topo -p2p w\n"
        + text(f"{H200}/topo-p2p-w.txt")
        + "user@host:~$ nvidia-smi topo --p2p=p\n"
        + text(f"{TOPO}/autodl_2x2080ti_p2p_p_NS.txt")
    )
    caps = split_captures(pasted, "pasted.txt")
    assert [(c.kind, c.mode) for c in caps] == [
        (TOPO_M, None),
        (TOPO_P2P, "write"),
        (TOPO_P2P, "pcie"),
    ]
    lines = clean_lines(pasted, "pasted.txt")
    for c in caps:  # each starts at its header line, numbered as in the file
        assert lines[c.line - 1].split()[:2] == ["GPU0", "GPU1"]
        assert c.text.splitlines()[c.line - 1] == lines[c.line - 1]
    assert caps[0].line == 2
    assert parse_topo_matrix(caps[0].text, "pasted.txt").gpus == ["GPU0", "GPU1"]
    assert set(parse_p2p(caps[2].text, "pasted.txt").status.values()) == {"NS"}


def test_a_single_capture_is_the_whole_file() -> None:
    (cap,) = split_captures(text(f"{TOPO}/xst_4xA10_sys_nic_legend.txt"), "x")
    assert (cap.kind, cap.line) == (TOPO_M, 1)
    (cap,) = split_captures("hello\n", "x")
    assert cap.kind is None and cap.text == "hello\n"
