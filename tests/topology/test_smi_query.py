from __future__ import annotations

import re

import pytest

from gpulane.errors import ParseError
from gpulane.topology.smi_query import parse_smi_query
from tests.topology.helpers import H200, text, to_crlf


def test_h200x2() -> None:
    q = parse_smi_query(text(f"{H200}/nvidia-smi-q.txt"), "q")
    assert q.driver == "580.159.04" and q.cuda == "13.0"
    assert [g.bus_id for g in q.gpus] == ["0000:00:06.0", "0000:00:07.0"]
    assert [g.model for g in q.gpus] == ["NVIDIA H200", "NVIDIA H200"]
    for g in q.gpus:
        assert g.pcie is not None
        assert (g.pcie.gen, g.pcie.gen_max, g.pcie.width, g.pcie.width_max) == (5, 5, 16, 16)
        assert g.pcie.downtrained is False
    assert (
        parse_smi_query(to_crlf(text(f"{H200}/nvidia-smi-q.txt"))).gpus[1].bus_id == "0000:00:07.0"
    )


def test_downtrained_and_truncated() -> None:
    t = text(f"{H200}/nvidia-smi-q.txt")
    lines = t.splitlines()
    with pytest.raises(ParseError, match="Attached GPUs") as e:
        parse_smi_query("\n".join(lines[:200]), "q")
    assert e.value.source == "q"
    with pytest.raises(ParseError, match="truncated") as e:
        parse_smi_query("\n".join(lines[:300]), "q")
    assert e.value.line == 300
    # A link at Gen3 x8 on the first GPU.
    t2 = re.sub(r"(\n\s+Current\s+: )5\n", r"\g<1>3\n", t, count=1)
    t2 = re.sub(r"(\n\s+Current\s+: )16x\n", r"\g<1>8x\n", t2, count=1)
    g = parse_smi_query(t2).gpus[0]
    assert g.pcie is not None and (g.pcie.gen, g.pcie.width, g.pcie.downtrained) == (3, 8, True)


def test_wrong_kind() -> None:
    with pytest.raises(ParseError, match="topo -m"):
        parse_smi_query(text(f"{H200}/topo-m.txt"), "q")
