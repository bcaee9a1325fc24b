"""``nvidia-smi nvlink -s`` output: the speed of each NVLink of each GPU.

GPU 0: NVIDIA H200 (UUID: GPU-...)
         Link 0: 26.562 GB/s
         Link 1: <inactive>
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulane.errors import ParseError
from gpulane.textio import clean_lines, first_content_line, guess_kind

WHAT = "nvidia-smi nvlink -s"
_GPU_RE = re.compile(r"^GPU (\d{1,4}): (.*?)(?: \(UUID: [^)]*\))?$")
_LINK_RE = re.compile(r"^\s*Link (\d{1,3}): (.*)$")
_SPEED_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?) ?(GB/s|MB/s|Gbps)$")


@dataclass
class NvlinkGpu:
    index: int
    model: str
    links: dict[int, float | None] = field(default_factory=dict)  # GB/s, None: inactive

    def active(self) -> dict[int, float]:
        return {k: v for k, v in self.links.items() if v is not None}


def parse_nvlink_status(text: str, source: str = "<text>") -> list[NvlinkGpu]:
    lines = clean_lines(text, source)
    start = first_content_line(lines)
    if start == len(lines):
        raise ParseError(f"empty: no {WHAT} output", source, 1)
    gpus: list[NvlinkGpu] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        m = _GPU_RE.match(line)
        if m:
            gpus.append(NvlinkGpu(index=int(m.group(1)), model=m.group(2).strip()))
            continue
        lm = _LINK_RE.match(line)
        if lm and gpus:
            link = int(lm.group(1))
            value = lm.group(2).strip()
            if link in gpus[-1].links:
                raise ParseError(
                    f"link {link} listed twice for GPU {gpus[-1].index}", source, number
                )
            if value.startswith("<") or value.lower() in ("inactive", "n/a"):
                gpus[-1].links[link] = None
                continue
            sm = _SPEED_RE.match(value)
            if not sm:
                raise ParseError(f"link speed {value!r} is not like '26.562 GB/s'", source, number)
            speed = float(sm.group(1))
            unit = sm.group(2)
            gpus[-1].links[link] = (
                speed / 1000 if unit == "MB/s" else speed / 8 if unit == "Gbps" else speed
            )
            continue
        kind = guess_kind(lines)
        what = (
            f"this looks like {kind} output, not {WHAT}"
            if kind and kind != WHAT
            else (f"unexpected line in {WHAT} output: {line.strip()[:40]!r}")
        )
        raise ParseError(what, source, number)
    if not gpus:
        raise ParseError(f"no 'GPU n: ...' lines: not {WHAT} output", source, start + 1)
    return gpus
