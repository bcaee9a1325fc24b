"""Every parser over mutations of the fixtures: nothing escapes but ParseError."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.errors import ParseError
from gpulane.topology.build import Inputs, build
from gpulane.topology.lspci import parse_lspci_tree, parse_lspci_verbose
from gpulane.topology.nvlink import parse_nvlink_status
from gpulane.topology.p2p import parse_p2p
from gpulane.topology.smi_query import parse_smi_query
from gpulane.topology.sysfs import parse_sysfs_listing
from gpulane.topology.topo_matrix import parse_topo_matrix
from tests.conftest import FIXTURES
from tests.topology.helpers import OLD_SOC, text

TOPO_FILES = ["h200x2/topo-m.txt"] + [
    f"public/topo/{p.name}"
    for p in sorted((FIXTURES / "public/topo").iterdir())
    if "p2p" not in p.name
]
PARSERS: list[tuple[str, Callable[[str, str], Any], list[str]]] = [
    ("topo", parse_topo_matrix, TOPO_FILES),
    ("p2p", parse_p2p, ["h200x2/topo-p2p-p.txt", "public/topo/autodl_2x2080ti_p2p_p_NS.txt"]),
    ("smi-q", parse_smi_query, ["h200x2/nvidia-smi-q.txt"]),
    ("nvlink", parse_nvlink_status, ["h200x2/nvlink-s.txt"]),
    ("sysfs", parse_sysfs_listing, ["h200x2/sysfs-pci.txt"]),
    (
        "lspci",
        parse_lspci_verbose,
        [
            f"public/lspci/{p.name}"
            for p in sorted((FIXTURES / "public/lspci").iterdir())
            if "_tv" not in p.name
        ],
    ),
    (
        "lspci-tv",
        parse_lspci_tree,
        [
            f"public/lspci/{p.name}"
            for p in sorted((FIXTURES / "public/lspci").iterdir())
            if "_tv" in p.name
        ],
    ),
]
TOKENS = [
    "X",
    "NV18",
    "NV0",
    "SOC",
    "SYS",
    "OK",
    "NS",
    "N/A",
    "GPU0",
    "NIC0",
    "\t",
    "  ",
    "\r\n",
    "\n",
    "\x1b[4m",
    "\x1b[0m",
    "Legend:",
    "-",
    "+-",
    "[00]",
    "x16",
    "GT/s",
    "\x00",
    "\x7f",
    "é",
    "\ufeff",
    ":",
    "=",
    "0-31",
    "LnkSta:",
    "Link 0:",
    "GPU 00000000:00:08.0",
]


@st.composite
def mutated(draw: st.DrawFn, base: str) -> str:
    t = base
    for _ in range(draw(st.integers(1, 4))):
        op = draw(
            st.sampled_from(["cut", "drop", "dup", "swap", "insert", "replace", "tabs", "case"])
        )
        lines = t.split("\n")
        if op == "cut":
            t = t[: draw(st.integers(0, max(len(t), 1)))]
        elif op == "drop" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            t = "\n".join(lines[:i] + lines[i + 1 :])
        elif op == "dup" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            t = "\n".join(lines[: i + 1] + lines[i:])
        elif op == "swap" and len(lines) > 1:
            i = draw(st.integers(0, len(lines) - 2))
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
            t = "\n".join(lines)
        elif op == "insert":
            i = draw(st.integers(0, len(t)))
            t = t[:i] + draw(st.sampled_from(TOKENS) | st.text(max_size=6)) + t[i:]
        elif op == "replace" and t:
            i = draw(st.integers(0, len(t) - 1))
            t = t[:i] + draw(st.characters()) + t[i + 1 :]
        elif op == "tabs":
            t = t.expandtabs(draw(st.integers(1, 8)))
        elif op == "case":
            t = t.lower() if draw(st.booleans()) else t.upper()
    return t


@pytest.mark.parametrize(("name", "parse", "files"), PARSERS, ids=[p[0] for p in PARSERS])
def test_fuzz(name: str, parse: Callable[[str, str], Any], files: list[str]) -> None:
    bases = [text(f) for f in files]
    if name == "topo":
        bases.append(OLD_SOC)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        base = data.draw(st.sampled_from(bases))
        t = data.draw(mutated(base))
        try:
            parsed = parse(t, "fuzz.txt")
        except ParseError as err:
            assert err.source == "fuzz.txt"
            assert str(err).startswith("fuzz.txt")
            return
        # What parses must also join into a topology without surprises.
        if name == "topo":
            build(Inputs(matrix=parsed)).to_json()
        elif name == "p2p":
            build(Inputs(p2p=[parsed])).to_json()
        elif name == "smi-q":
            build(Inputs(smi=parsed)).to_json()
        elif name == "lspci":
            build(Inputs(lspci=parsed)).to_json()
        elif name == "lspci-tv":
            build(Inputs(trees=[parsed])).to_json()
        elif name == "sysfs":
            build(Inputs(sysfs=parsed)).to_json()
        elif name == "nvlink":
            build(Inputs(nvlink=parsed)).to_json()

    check()


@given(st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
@settings(max_examples=200, deadline=None)
def test_random_text(t: str) -> None:
    for _, parse, _ in PARSERS:
        with contextlib.suppress(ParseError):
            parse(t, "r")
