"""``nvidia-smi nvlink -e``: each GPU's NVLink error counters, link by link.

Printed as ``GPU 0: NVIDIA H200 (UUID: ...)`` followed by ``Link 0: Replay Errors: 0``
lines (one counter a line, or several on one line); counter names differ between driver
generations (Replay, Recovery, CRC on older; more on newer), so every ``Name: number``
pair is kept as printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_GPU = re.compile(r"^GPU (?P<i>\d{1,4}): (?P<name>.{0,120}?)(?: \(UUID: [^)]*\))?\s*$")
_LINK = re.compile(r"^\s*Link (?P<l>\d{1,3}): (?P<rest>.{1,400})$")
_COUNTER = re.compile(r"(?P<name>[A-Za-z][A-Za-z /_-]{0,60}?)\s*:\s*(?P<value>-?\d{1,20})(?![\d.])")


@dataclass
class NvlinkErrors:
    index: int
    name: str
    links: dict[int, dict[str, int]] = field(default_factory=dict)

    def nonzero(self) -> list[tuple[int, str, int]]:
        return [
            (link, counter, value)
            for link, counters in sorted(self.links.items())
            for counter, value in counters.items()
            if value > 0 and "error" in counter.lower()
        ]


def parse_nvlink_errors(text: str) -> list[NvlinkErrors]:
    out: list[NvlinkErrors] = []
    for line in text.splitlines():
        m = _GPU.match(line.strip())
        if m is not None:
            out.append(NvlinkErrors(int(m.group("i")), m.group("name").strip()))
            continue
        lm = _LINK.match(line)
        if lm is None or not out:
            continue
        counters = out[-1].links.setdefault(int(lm.group("l")), {})
        for c in _COUNTER.finditer(lm.group("rest")):
            counters[c.group("name").strip()] = int(c.group("value"))
    return out
