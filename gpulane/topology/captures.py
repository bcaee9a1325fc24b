"""Files that hold several nvidia-smi captures one after another, as users paste them.

A typical paste is ``nvidia-smi topo -m`` followed by one or more ``nvidia-smi topo -p2p
MODE`` outputs, each perhaps below the command line (or shell prompt) that printed it.
:func:`split_captures` finds each matrix by its header row and tells the two kinds apart
by their cells (path labels against P2P status codes); a ``topo -p2p MODE`` command line
above a P2P matrix gives its mode. Each capture keeps the file's line numbers, so a
parser's error still names the right line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpulane.textio import clean_lines
from gpulane.topology import paths
from gpulane.topology.p2p import KNOWN_CODES, mode_name

TOPO_M = "nvidia-smi topo -m"
TOPO_P2P = "nvidia-smi topo -p2p"

_COMMAND = re.compile(
    r"nvidia-smi\s+topo\s+(?:(?P<matrix>-m|--matrix)\b|(?:-p2p|--p2p)[\s=]*(?P<mode>[rwnap])\b)",
    re.IGNORECASE,
)
_GPU = re.compile(r"^GPU\d{1,4}$")


@dataclass
class Capture:
    kind: str | None  # TOPO_M, TOPO_P2P, or None when no matrix header was found
    text: str  # the capture's lines, earlier lines blanked so that line numbers stay
    line: int  # its first line in the file (1-based)
    mode: str | None = None  # topo -p2p mode from the command line above it


def _kind(cells: list[str], header: list[str]) -> str:
    if any(c in KNOWN_CODES for c in cells):
        return TOPO_P2P
    if any(paths.is_label(c) and c != paths.SELF for c in cells) or "CPU" in header:
        return TOPO_M
    return TOPO_P2P if all(_GPU.match(t) for t in header) else TOPO_M


def split_captures(text: str, source: str) -> list[Capture]:
    """The matrices in ``text`` in file order; one Capture of kind None (the whole text)
    when no matrix header is found, so that the parser names what the file is instead."""
    lines = clean_lines(text, source)
    starts: list[tuple[int, str, str | None]] = []  # (index, kind, mode)
    stops: set[int] = set()  # command lines end the capture before them
    mode: str | None = None
    for i, line in enumerate(lines):
        if cmd := _COMMAND.search(line):
            stops.add(i)
            mode = mode_name(cmd.group("mode")) if cmd.group("mode") else None
            continue
        header = line.split()
        if not header or not _GPU.match(header[0]):
            continue
        row = next((lines[j].split() for j in range(i + 1, len(lines)) if lines[j].strip()), [])
        if row[:1] != header[:1]:
            continue  # a matrix row, not a header
        kind = _kind(row[1:], header)
        starts.append((i, kind, mode if kind == TOPO_P2P else None))
        mode = None
    if not starts:
        return [Capture(None, text, 1)]
    captures = []
    for n, (i, kind, cap_mode) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        end = min([s for s in stops if i < s < end], default=end)
        body = "\n" * i + "\n".join(lines[i:end]) + "\n"
        captures.append(Capture(kind, body, i + 1, cap_mode))
    return captures
