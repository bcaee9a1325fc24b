"""``nvidia-smi topo -p2p MODE`` output: the P2P status of each GPU pair for one mode.

Modes are nvidia-smi's letters: r (read), w (write), n (nvlink), a (atomics), p (pcie).
Statuses are kept as printed: X, OK, CNS, GNS, TNS, NS, U, and any other code a driver
prints (listed in its legend or not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpulane.errors import ParseError
from gpulane.textio import clean_lines, first_content_line, wrong_kind
from gpulane.topology import paths

WHAT = "nvidia-smi topo -p2p"
MODES = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "pcie"}
KNOWN_CODES = {
    "OK": "Status Ok",
    "CNS": "Chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "Topology not supported",
    "NS": "Not supported",
    "U": "Unknown",
}
_CODE_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,7}$")
_GPU_RE = re.compile(r"^GPU\d{1,4}$")
_MODE_IN_NAME = re.compile(r"p2p[-_ ]?([rwnap])(?:[-_. ]|$)", re.IGNORECASE)


def mode_name(mode: str) -> str:
    """``r`` -> ``read``; full names pass through; anything else is kept as given."""
    mode = mode.strip()
    if mode.lower() in MODES:
        return MODES[mode.lower()]
    return mode.lower()


def mode_from_filename(path: str) -> str | None:
    """The mode a file name carries (``topo-p2p-r.txt`` -> ``read``), or None."""
    m = _MODE_IN_NAME.search(Path(path).name)
    return MODES[m.group(1).lower()] if m else None


@dataclass
class P2PMatrix:
    source: str
    mode: str | None
    gpus: list[str]
    status: dict[tuple[str, str], str]
    legend: dict[str, str] = field(default_factory=dict)

    def unknown_codes(self) -> set[str]:
        return {s for s in self.status.values() if s not in KNOWN_CODES}


def parse_p2p(text: str, source: str = "<text>", mode: str | None = None) -> P2PMatrix:
    """Parse one ``topo -p2p`` matrix; :class:`ParseError` names the file and line."""
    lines = clean_lines(text, source)
    start = first_content_line(lines)
    if start == len(lines):
        raise ParseError(f"empty: no {WHAT} matrix", source, 1)
    other = wrong_kind(WHAT, lines, source)
    if other is not None:
        raise other
    header = lines[start].split()
    if "CPU" in header or "Affinity" in header:
        raise ParseError(
            "this looks like nvidia-smi topo -m output (it has affinity columns), not "
            "topo -p2p (pass it with --topo-file)",
            source,
            start + 1,
        )
    for tok in header:
        if not _GPU_RE.match(tok):
            raise ParseError(
                f"{tok!r} in the header: a P2P matrix has only GPU columns", source, start + 1
            )
    if not header:
        raise ParseError("no GPU columns in the header", source, start + 1)
    if len(set(header)) != len(header):
        raise ParseError("a GPU column appears twice in the header", source, start + 1)
    n = len(header)
    status: dict[tuple[str, str], str] = {}
    i = start + 1
    for row in range(n):
        if i >= len(lines) or not lines[i].strip() or lines[i].strip().startswith("Legend"):
            raise ParseError(
                f"truncated matrix: no row for {', '.join(header[row:])}", source, i + 1
            )
        tokens = lines[i].split()
        if tokens[0] != header[row]:
            raise ParseError(
                f"expected the row of {header[row]}, found {tokens[0]!r}", source, i + 1
            )
        cells = tokens[1:]
        if len(cells) != n:
            raise ParseError(
                f"row {header[row]} has {len(cells)} cells, the header has {n} GPUs",
                source,
                i + 1,
            )
        for col, cell in enumerate(cells):
            if col == row:
                if cell != paths.SELF:
                    raise ParseError(
                        f"{header[row]} against itself should be X, found {cell!r}", source, i + 1
                    )
                continue
            if paths.is_label(cell):
                raise ParseError(
                    f"{cell!r} is a path label, not a P2P status: this looks like "
                    "nvidia-smi topo -m output (pass it with --topo-file)",
                    source,
                    i + 1,
                )
            if not _CODE_RE.match(cell) or cell == paths.SELF:
                raise ParseError(
                    f"{cell!r} between {header[row]} and {header[col]} is not a P2P status "
                    "(OK, CNS, GNS, TNS, NS, U, ...)",
                    source,
                    i + 1,
                )
            status[(header[row], header[col])] = cell
        i += 1

    legend: dict[str, str] = {}
    in_legend = False
    for j in range(i, len(lines)):
        s = lines[j].strip()
        if not s:
            continue
        if s.rstrip(":") == "Legend":
            in_legend = True
            continue
        if not in_legend:
            raise ParseError(f"unexpected line after the matrix: {s[:40]!r}", source, j + 1)
        if "=" in s:
            key, _, meaning = s.partition("=")
            legend[key.strip()] = meaning.strip()
    return P2PMatrix(
        source=source,
        mode=mode_name(mode) if mode else None,
        gpus=header,
        status=status,
        legend=legend,
    )
