"""`gpulane parse bandwidthtest FILE...`: CUDA samples' bandwidthTest as copy rows.

Quick, range and shmoo modes; GB/s, or old versions' ``Bandwidth(MB/s)`` (2^20 bytes/s,
converted to GB/s = 1e9 bytes/s; the printed figure is kept in ``extra.printed``).

``--csv`` prints one line per figure instead of the tables:
``bandwidthTest-H2D-Pinned, Bandwidth = 12.4 GB/s, Time = 0.00549 s, Size = 68000000 bytes,
NumDevsUsed = 1`` (``D2D`` has no memory part; ``-Paged``, ``-Pinned-WriteCombined``; older
builds print MB/s). Those lines are rows as the table lines are.

Lines are read one at a time. bandwidthTest's verdict (``Result = PASS``/``FAIL``) comes
last and applies to every figure above it, so a file's rows are held until that line
(the whole printout is a few hundred lines at most) and then given out with it. A value
line cut off at the end of the file, or a file that ends before its ``Result =`` line,
becomes an error row naming the line; figures on complete lines are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from gpulane.errors import ParseError
from gpulane.record import Row
from gpulane.transfers.importers.common import (
    MIB_PER_S_IN_GBPS,
    Line,
    cell_value,
    complete,
    copy_row,
    default_build,
    error_row,
    file_lines,
    say,
    say_error,
    text_lines,
    time_us,
)

WHAT = "CUDA samples' bandwidthTest (host<->device and device copies)"
OPTIONS: dict[str, str] = {}
BACKEND = "bandwidthTest"

_BANNER = re.compile(r"\[CUDA Bandwidth Test\]", re.IGNORECASE)
_SECTION = re.compile(
    r"^\s*(Host to Device|Device to Host|Device to Device) Bandwidth,\s*(\d+)\s*Device\(s\)",
    re.IGNORECASE,
)
_MEMORY = re.compile(r"^\s*(PINNED|PAGEABLE) Memory Transfers", re.IGNORECASE)
_HEADER = re.compile(r"Transfer Size \(Bytes\)\s+Bandwidth\s*\((GB|MB)/s\)", re.IGNORECASE)
_DEVICE = re.compile(r"^\s*Device\s+(\d+)\s*:\s*(.+?)\s*$")
_VALUE = re.compile(r"^\s*(\d+)\s+(\S+)\s*$")
# --csv: bandwidthTest-<H2D|D2H|D2D>[-Pinned|-Paged[Memory]][-WriteCombined], field = value, ...
_CSV = re.compile(r"^\s*bandwidthTest-(H2D|D2H|D2D)((?:-[A-Za-z]+)*)\s*,(.*)$", re.IGNORECASE)
_CSV_BW = re.compile(r"\bBandwidth\s*=\s*(\S+)\s*(GB|MB)/s", re.IGNORECASE)
_CSV_SIZE = re.compile(r"\bSize\s*=\s*(\d{1,20})\s*bytes", re.IGNORECASE)
_CSV_DEVS = re.compile(r"\bNumDevsUsed\s*=\s*(\d{1,4})", re.IGNORECASE)
_RESULT = re.compile(r"^\s*Result\s*=\s*(.*?)\s*$")
_VERDICTS = {"PASS", "FAIL", "WAIVED"}
_OPS = {"host to device": "h2d", "device to host": "d2h", "device to device": "d2d"}


class _State:
    def __init__(self, source: str, run_id: str, build: str) -> None:
        self.source, self.run_id, self.build = source, run_id, build
        self.devices: dict[int, str] = {}
        self.banner = False
        self.section: str | None = None  # the heading as printed
        self.op: str | None = None
        self.ndev = 1
        self.memory = "pinned"
        self.memory_line = ""
        self.wc = False
        self.unit: str | None = None
        self.seen: list[str] = []
        self.held: list[Row] = []
        self.verdicts = 0  # runs that ended with their Result line

    def cut(self, line: int, what: str) -> Row:
        return error_row(
            self.run_id, BACKEND, self.source, self.build, line, what, op=self.op or "unknown"
        )

    def cut_inside(self, number: int, what: str, line: str) -> Iterator[Row]:
        """The rows held, then an error row: the file ends inside ``line``."""
        yield from self.held
        yield self.cut(
            number,
            f"the file ends inside {what} ({line.strip()!r}): cut off; that figure and "
            "everything after it is missing",
        )

    def value_row(self, number: int, size: int, cell: str) -> Row | None:
        value = cell_value(cell, self.source, number)
        if value is None or self.op is None or self.unit is None:
            return None
        gbps = value * MIB_PER_S_IN_GBPS if self.unit == "MB" else value
        devices = sorted(self.devices)
        if self.ndev > 1:
            gpu = "GPU" + ",".join(str(d) for d in devices)
        else:
            gpu = f"GPU{devices[0]}" if devices else "GPU0"
        memory = "device" if self.op == "d2d" else self.memory
        if memory == "pinned" and self.wc:
            memory = "pinned-wc"
        src, dst = {"h2d": ("host", gpu), "d2h": (gpu, "host"), "d2d": (gpu, gpu)}[self.op]
        extra: dict[str, Any] = {
            "line": number,
            "section": self.section,
            "memory_line": self.memory_line,
            "unit": f"{self.unit}/s",
            "printed": cell,
        }
        if self.devices:
            extra["gpu_model"] = sorted(set(self.devices.values()))[0]
        if self.ndev > 1:
            extra["devices"] = self.ndev
        return copy_row(
            self.run_id, BACKEND, self.source, self.build, op=self.op, memory=memory, src=src,
            dst=dst, bidirectional=False, size_bytes=size, algbw_gbps=gbps,
            time_us=time_us(size, gbps), world_size=self.ndev, extra=extra,
        )  # fmt: skip


def _csv_line(st: _State, number: int, line: str, m: re.Match[str]) -> Row | None:
    """A ``--csv`` line as a row; an error row when a field is missing or unreadable."""
    st.op = {"h2d": "h2d", "d2h": "d2h", "d2d": "d2d"}[m.group(1).lower()]
    tags = {t.lower() for t in m.group(2).split("-") if t}
    st.memory = (
        "pageable" if tags & {"paged", "pageable", "pagedmemory", "pageablememory"} else ("pinned")
    )
    st.wc = "writecombined" in tags
    st.section, st.memory_line = line.split(",", 1)[0].strip(), ""
    if m.group(1).upper() not in st.seen:
        st.seen.append(m.group(1).upper())
    bw, size, devs = (r.search(m.group(3)) for r in (_CSV_BW, _CSV_SIZE, _CSV_DEVS))
    if bw is None or size is None:
        missing = "Bandwidth" if bw is None else "Size"
        return st.cut(
            number, f"the --csv line has no readable '{missing} =' field ({line.strip()!r})"
        )
    st.unit = bw.group(2).upper()
    st.ndev = int(devs.group(1)) if devs else 1
    row = st.value_row(number, int(size.group(1)), bw.group(1))
    st.unit = None  # a --csv line is a table of its own
    return row


def rows_from_lines(
    lines: Iterable[Line], source: str, run_id: str = "import", build: str | None = None
) -> Iterator[Row]:
    """Rows of one bandwidthTest printout; :class:`ParseError` when it is not one."""
    st = _State(source, run_id, build or default_build(source))
    last = 0
    for number, raw, ended in lines:
        last = number
        line = raw.rstrip()
        if not line.strip():
            continue
        if _BANNER.search(line):
            st.banner = True
            continue
        if m := _DEVICE.match(line):
            st.devices[int(m.group(1))] = m.group(2)
            continue
        if m := _SECTION.match(line):
            st.section, st.op, st.ndev = line.strip(), _OPS[m.group(1).lower()], int(m.group(2))
            st.unit, st.memory, st.memory_line, st.wc = None, "pinned", "", False
            st.seen.append(m.group(1))
            continue
        if m := _CSV.match(line):
            if not ended:  # a --csv line's fields all count: cut anywhere, it is cut
                yield from st.cut_inside(number, "a --csv line", line)
                return
            if (row := _csv_line(st, number, line, m)) is not None:
                st.held.append(row)
            continue
        if m := _MEMORY.match(line):
            st.memory, st.memory_line = m.group(1).lower(), line.strip()
            continue
        if "write-combined" in line.lower():
            st.wc = "enabled" in line.lower()
            continue
        if m := _HEADER.search(line):
            if st.op is None:
                raise ParseError(
                    "a transfer table before any '... Bandwidth' heading", source, number
                )
            st.unit = m.group(1).upper()
            continue
        if m := _RESULT.match(line):
            verdict = m.group(1)
            if not ended and verdict.upper() not in _VERDICTS:
                yield from st.held
                yield st.cut(number, f"the file ends inside the 'Result =' line ({line.strip()!r})")
                return
            for row in st.held:
                row.extra["result"] = verdict
                if verdict.upper() != "PASS":
                    row.status, row.error = "error", f"bandwidthTest reported Result = {verdict}"
            if not st.held:
                yield st.cut(number, f"Result = {verdict} with no figures above it")
            yield from st.held
            # Another run may follow (outputs pasted one after another).
            st.held, st.seen, st.section, st.op, st.unit = [], [], None, None, None
            st.banner = False
            st.verdicts += 1
            continue
        if st.unit is not None:
            m = _VALUE.match(line.replace("\t", " "))
            if not m:
                st.unit = None  # the table ended
                continue
            if not complete((number, raw, ended)):
                yield from st.cut_inside(number, f"a {st.section} value line", line)
                return
            value = st.value_row(number, int(m.group(1)), m.group(2))
            if value is not None:
                st.held.append(value)
    if not st.held and not st.seen and not st.banner:
        if st.verdicts:
            return  # every run ended with its verdict
        raise ParseError("no bandwidthTest transfer table found", source)
    yield from st.held
    read = ", ".join(st.seen) or "none"
    yield st.cut(
        last,
        f"the output ends at line {last} without bandwidthTest's 'Result =' line: cut off "
        f"(tables read: {read}); the verdict and any later figures are missing",
    )


def stream_rows(
    path: str, *, run_id: str | None, build: str | None, **options: str | None
) -> Iterator[Row]:
    """The importer contract (gpulane.session.imports): rows of one file, as they are read."""
    return rows_from_lines(file_lines(path), str(path), run_id or "import", build)


def parse_bandwidthtest(text: str, source: str = "<text>", run_id: str = "import") -> list[Row]:
    """Rows of bandwidthTest output already in memory."""
    return list(rows_from_lines(text_lines(text), source, run_id))


def render(rows: Iterable[Row], console: Any) -> None:
    """The tables as bandwidthTest prints them, with error rows in red."""
    source = section = memory_line = None
    result: str | None = None
    for row in rows:
        extra = row.extra or {}
        if row.source != source:
            if result is not None:
                say(console, f"Result = {result}")
            source, section, memory_line, result = row.source, None, None, None
            say(console, f"{source}", style="bold")
            if extra.get("gpu_model"):
                say(console, f" Device: {extra['gpu_model']}")
        if row.algbw_gbps is None:
            say_error(console, row)
            continue
        if extra.get("section") != section:
            section, memory_line = extra.get("section"), None
            say(console, f" {section}")
        if extra.get("memory_line") != memory_line:
            memory_line = extra.get("memory_line")
            if memory_line:
                say(console, f" {memory_line}")
            say(console, f"   {'Transfer Size (Bytes)':<28} Bandwidth({extra.get('unit', 'GB/s')})")
        style = "red" if row.status != "ok" else None
        say(console, f"   {row.size_bytes!s:<28} {extra.get('printed', row.algbw_gbps)}", style)
        result = extra.get("result", result)
    if result is not None:
        say(console, f"Result = {result}")
