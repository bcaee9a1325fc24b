"""Every parser over mutations of the fixtures and over random text: nothing escapes but
ParseError, and what a parser returns comes from the text (no name, label or number it
did not read)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.errors import ParseError
from gpulane.topology.build import Inputs, build
from gpulane.topology.lspci import parse_lspci_tree, parse_lspci_verbose
from gpulane.topology.nvlink import parse_nvlink_status
from gpulane.topology.p2p import parse_p2p
from gpulane.topology.paths import LEGACY_LABELS
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
# Fields a parser makes rather than reads: the source name, line numbers, and names it
# composes from what it read (smi-q's "Section/Field" paths, lspci -tv's bus ids and bus
# numbers from the tree's brackets, GPU/NIC names numbered in order where a legend has none,
# PCIe generations from the GT/s the text gives).
MADE = {"source", "line", "fields", "nodes", "bus_id", "parent", "secondary", "gen", "gen_max",
        "sta_gen", "cap_gen"}  # fmt: skip
NUMBERED = re.compile(r"^(GPU|NIC)\d+$")


def leaves(obj: Any, key: str | None = None) -> Iterator[tuple[str | None, Any]]:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from leaves(getattr(obj, f.name), f.name)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(k, key)
            yield from leaves(v, k if isinstance(k, str) else key)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            yield from leaves(v, key)
    else:
        yield key, obj


def assert_only_what_the_text_says(parsed: Any, text: str) -> None:
    """Every string and number in ``parsed`` is in ``text`` (case aside), but for MADE."""
    # the parsers drop terminal colour codes (nvidia-smi prints them): the text without them
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    folded = text.casefold()
    for key, value in leaves(parsed):
        if key in MADE or value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            said = [value, *(old for old, new in LEGACY_LABELS.items() if new == value)]
            if value and not NUMBERED.match(value):  # SYS read from an old SOC counts
                assert any(v.casefold() in folded for v in said), (key, value)
        elif isinstance(value, (int, float)):
            shown = str(int(value)) if float(value).is_integer() else str(value)
            assert shown in text, (key, value)


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
        assert_only_what_the_text_says(parsed, t)
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
        try:
            parsed = parse(t, "r")
        except ParseError as err:
            assert err.source == "r" and str(err).startswith("r")
            continue
        assert_only_what_the_text_says(parsed, t)
