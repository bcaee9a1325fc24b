"""`gpulane parse p2p FILE...`: CUDA samples' p2pBandwidthLatencyTest as copy rows.

What the file says is what the rows say:
- Peer access comes from the file's own statements (``Device=0 CANNOT Access Peer
  Device=1`` and the P2P connectivity matrix). Under a ``P2P=Enabled`` heading a pair
  without peer access fell back to a copy through host memory: its row says
  ``peer_access: false``. Where the file makes no statement, ``peer_access`` is null.
- A bidirectional figure is the sum of both directions over one common time window, as
  the tool prints it: the row's ``algbw_gbps`` is that printed figure, the row says
  ``bidirectional: true`` and ``extra.figure: "sum of both directions"``, and
  ``extra.per_direction_gbps`` (half of it) stands beside it.
- Latency matrices come in pairs: GPU-timed (CUDA events, time per copy) and CPU-timed
  (host time to issue one copy while the stream waits); ``extra.timer`` is ``gpu`` or
  ``cpu`` and the printout labels each.
- With ``--p2p_read``, the read matrices copy from the column's GPU to the row's GPU.

Rows are given out a matrix line at a time. A file that ends inside a matrix line, or
before every matrix the tool prints, gets an error row naming the line and what is
missing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gpulane.errors import ParseError
from gpulane.record import Row
from gpulane.transfers.importers.common import (
    Line,
    cell_value,
    complete,
    copy_row,
    default_build,
    error_row,
    file_lines,
    matrix_lines,
    say,
    say_error,
    text_lines,
)

WHAT = "CUDA samples' p2pBandwidthLatencyTest (GPU<->GPU bandwidth and latency matrices)"
OPTIONS: dict[str, str] = {}
BACKEND = "p2pBandwidthLatencyTest"

_BANNER = re.compile(r"\[P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test\]", re.IGNORECASE)
_BW = re.compile(
    r"^\s*(Unidirectional|Bidirectional)\s+P2P=(Enabled|Disabled)\s+Bandwidth"
    r"(?:\s*\(P2P (Writes|Reads)\))?\s+Matrix\s*\(GB/s\)",
    re.IGNORECASE,
)
_LAT = re.compile(
    r"^\s*P2P=(Enabled|Disabled)\s+Latency(?:\s*\(P2P (Writes|Reads)\))?\s+Matrix\s*\(us\)",
    re.IGNORECASE,
)
_DEVICE = re.compile(r"^\s*Device:\s*(\d+),\s*([^,]+),")
_ACCESS = re.compile(r"^\s*Device=(\d+)\s+(CAN|CANNOT)\s+Access\s+Peer\s+Device=(\d+)")
_CONNECTIVITY = re.compile(r"^\s*P2P Connectivity Matrix\s*$", re.IGNORECASE)
_HEAD = re.compile(r"^\s*(D\\D|GPU|CPU)((?:\s+\d+)+)\s*$")

# (kind, bidirectional, peer enabled, method) -> heading as the tool prints it
_TITLES: dict[tuple[str, bool, bool, str | None], str] = {
    ("bw", False, False, None): "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
    (
        "bw",
        False,
        True,
        "writes",
    ): "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
    ("bw", False, True, "reads"): "Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)",
    ("bw", True, False, None): "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
    ("bw", True, True, None): "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)",
    ("lat", False, False, None): "P2P=Disabled Latency Matrix (us)",
    ("lat", False, True, "writes"): "P2P=Enabled Latency (P2P Writes) Matrix (us)",
    ("lat", False, True, "reads"): "P2P=Enabled Latency (P2P Reads) Matrix (us)",
}
_ALWAYS = [k for k in _TITLES if k[3] != "reads"]
TIMERS = {
    "gpu": "GPU timer: CUDA events, time per copy",
    "cpu": "CPU timer: host clock, time to issue one copy while the stream waits",
}
_CORNER_TIMER = {"GPU": "gpu", "CPU": "cpu", "D\\D": "gpu"}

Key = tuple[str, bool, bool, str | None]


@dataclass
class _Matrix:
    key: Key
    heading_line: int
    corner: str = ""
    cols: list[int] = field(default_factory=list)
    rows_read: int = 0
    started: bool = False


class _State:
    def __init__(self, source: str, run_id: str, build: str) -> None:
        self.source, self.run_id, self.build = source, run_id, build
        self.models: dict[int, str] = {}
        self.access: dict[tuple[int, int], bool] = {}
        self.banner = False
        self.connectivity: list[int] | None = None  # columns of the connectivity matrix
        self.matrix: _Matrix | None = None
        self.done: dict[Key, set[str]] = {}  # section -> timers read in full
        self.rows = 0

    def missing(self) -> list[str]:
        want = list(_ALWAYS)
        if any(k[3] == "reads" for k in self.done):
            want += [k for k in _TITLES if k[3] == "reads"]
        out = []
        for key in want:
            timers = self.done.get(key, set())
            if key[0] == "lat" and "gpu" in timers and "cpu" not in timers and "old" not in timers:
                out.append(f"the CPU-timer matrix of '{_TITLES[key]}'")
            elif not timers:
                out.append(f"'{_TITLES[key]}'")
        return out

    def cut(self, line: int, what: str) -> Row:
        missing = self.missing()
        if missing:
            what += "; missing: " + ", ".join(missing)
        return error_row(self.run_id, BACKEND, self.source, self.build, line, what, op="p2p")

    def rows_of(self, m: _Matrix, number: int, r: int, values: list[float | None]) -> Iterator[Row]:
        kind, bidir, peer, method = m.key
        timer = _CORNER_TIMER.get(m.corner.upper(), "gpu") if kind == "lat" else None
        for c, value in zip(m.cols, values, strict=True):
            if value is None:
                continue
            # P2P reads copy from the column's GPU into the row's GPU; every other matrix
            # copies from the row's GPU to the column's.
            a, b = (c, r) if method == "reads" else (r, c)
            access = None if r == c else (self.access.get((r, c)) if peer else False)
            extra: dict[str, Any] = {"line": number, "section": _TITLES[m.key]}
            extra["p2p_requested"] = peer
            if method and peer:
                extra["p2p_method"] = method
            if peer and access is False:
                extra["note"] = (
                    "the file says this pair has no peer access: the copy went through host memory"
                )
            if r in self.models:
                extra["gpu_model"] = self.models[r]
            fields: dict[str, Any] = {}
            if kind == "bw":
                fields["algbw_gbps"] = value
                if bidir:
                    extra["figure"] = "sum of both directions"
                    extra["per_direction_gbps"] = value / 2
            else:
                fields["time_us"] = value
                extra["test"] = "latency"
                extra["timer"] = timer
                extra["timer_label"] = TIMERS[timer or "gpu"]
            self.rows += 1
            yield copy_row(
                self.run_id, BACKEND, self.source, self.build, op="p2p" if r != c else "d2d",
                memory="device", src=f"GPU{a}", dst=f"GPU{b}", peer_access=access,
                bidirectional=bidir, world_size=len(m.cols), extra=extra, **fields,
            )  # fmt: skip

    def close_matrix(self, number: int) -> None:
        m = self.matrix
        if m is None or not m.started:
            return
        if m.rows_read < len(m.cols):
            raise ParseError(
                f"'{_TITLES[m.key]}' has {m.rows_read} rows for {len(m.cols)} GPUs",
                self.source,
                number,
            )
        timer = (
            "old" if m.corner == "D\\D" and m.key[0] == "lat" else _CORNER_TIMER[m.corner.upper()]
        )
        self.done.setdefault(m.key, set()).add(timer)
        if m.key[0] == "lat" and m.corner.upper() == "GPU":
            # The CPU-timed matrix follows under the same heading.
            self.matrix = _Matrix(m.key, m.heading_line)
        else:
            self.matrix = None


def _key(bw: re.Match[str] | None, lat: re.Match[str] | None) -> Key:
    if bw:
        bidir = bw.group(1).lower() == "bidirectional"
        peer = bw.group(2).lower() == "enabled"
        method = None if bidir or not peer else (bw.group(3) or "writes").lower()
        return ("bw", bidir, peer, method)
    assert lat is not None
    peer = lat.group(1).lower() == "enabled"
    return ("lat", False, peer, (lat.group(2) or "writes").lower() if peer else None)


def rows_from_lines(
    lines: Iterable[Line], source: str, run_id: str = "import", build: str | None = None
) -> Iterator[Row]:
    """Rows of one p2pBandwidthLatencyTest printout; :class:`ParseError` when it is not one."""
    st = _State(source, run_id, build or default_build(source))
    last = 0
    for line_ in lines:
        number, raw, ended = line_
        last = number
        parts = raw.split()
        m = st.matrix
        if m is not None and m.started and parts and parts[0].isdigit():
            if len(parts) != len(m.cols) + 1:
                if not ended:
                    yield st.cut(
                        number, f"the file ends inside a row of '{_TITLES[m.key]}': cut off"
                    )
                    return
                raise ParseError(
                    f"matrix row has {len(parts) - 1} values for {len(m.cols)} columns",
                    source,
                    number,
                )
            if not complete(line_):
                yield st.cut(
                    number,
                    f"the file ends inside a row of '{_TITLES[m.key]}' ({raw.strip()!r}): cut off; "
                    "its last figure may be cut short, so the row is not imported",
                )
                return
            values = [cell_value(p, source, number) for p in parts[1:]]
            yield from st.rows_of(m, number, int(parts[0]), values)
            m.rows_read += 1
            continue
        if m is not None and m.started:
            st.close_matrix(number)
        if st.connectivity is not None:
            if parts and parts[0].isdigit() and len(parts) == len(st.connectivity) + 1:
                if complete(line_):
                    r = int(parts[0])
                    for c, flag in zip(st.connectivity, parts[1:], strict=True):
                        if r != c and flag in ("0", "1"):
                            st.access.setdefault((r, c), flag == "1")
                continue
            if not (parts and parts[0] == "D\\D"):
                st.connectivity = None
        if not parts:
            continue
        if _BANNER.search(raw):
            st.banner = True
        elif d := _DEVICE.match(raw):
            st.models[int(d.group(1))] = d.group(2).strip()
        elif a := _ACCESS.match(raw):
            # The file's own statement wins over the connectivity matrix.
            st.access[(int(a.group(1)), int(a.group(3)))] = a.group(2).upper() == "CAN"
        elif _CONNECTIVITY.match(raw):
            st.connectivity = []
        elif (h := _HEAD.match(raw)) and st.connectivity == [] and h.group(1) == "D\\D":
            st.connectivity = [int(c) for c in h.group(2).split()]
        elif _BW.match(raw) or _LAT.match(raw):
            st.matrix = _Matrix(_key(_BW.match(raw), _LAT.match(raw)), number)
        elif (h := _HEAD.match(raw)) and st.matrix is not None and not st.matrix.started:
            st.matrix.corner, st.matrix.cols, st.matrix.started = (
                h.group(1), [int(c) for c in h.group(2).split()], True,
            )  # fmt: skip
    m = st.matrix
    if m is not None and m.started and m.rows_read >= len(m.cols):
        st.close_matrix(last)
        m = st.matrix
    if st.rows == 0 and not st.banner and not st.done and m is None:
        raise ParseError("no p2pBandwidthLatencyTest matrix found", source)
    if m is not None:
        title = _TITLES[m.key]
        if m.started:
            where = f"after {m.rows_read} of {len(m.cols)} rows of '{title}'"
        elif "gpu" in st.done.get(m.key, set()):
            where = f"after the GPU-timer matrix of '{title}'"
        else:
            where = f"after the heading '{title}' (line {m.heading_line})"
        yield st.cut(last, f"the output ends at line {last} {where}: cut off")
    elif st.missing():
        yield st.cut(last, f"the output ends at line {last}: cut off")


def stream_rows(
    path: str, *, run_id: str | None, build: str | None, **options: str | None
) -> Iterator[Row]:
    """The importer contract (gpulane.session.imports): rows of one file, as they are read."""
    return rows_from_lines(file_lines(path), str(path), run_id or "import", build)


def parse_p2p(text: str, source: str = "<text>", run_id: str = "import") -> list[Row]:
    """Rows of p2pBandwidthLatencyTest output already in memory."""
    return list(rows_from_lines(text_lines(text), source, run_id))


def _gpu(name: str | None) -> int:
    return int((name or "GPU0")[3:])


def _print_group(console: Any, rows: list[Row]) -> None:
    first = rows[0]
    extra = first.extra or {}
    section = str(extra.get("section"))
    timer = extra.get("timer")
    if timer is None or timer == "gpu":
        say(console, section)
    if timer is not None:
        say(console, f"   {extra.get('timer_label')}")
    reads = extra.get("p2p_method") == "reads"
    cells: dict[tuple[int, int], str] = {}
    halves: dict[tuple[int, int], str] = {}
    no_peer = []
    for row in rows:
        a, b = _gpu(row.src), _gpu(row.dst)
        at = (b, a) if reads else (a, b)
        value = row.algbw_gbps if row.algbw_gbps is not None else row.time_us
        cells[at] = f"{value:.2f}"
        half = (row.extra or {}).get("per_direction_gbps")
        if half is not None:
            halves[at] = f"{half:.2f}"
        if row.peer_access is False and (row.extra or {}).get("p2p_requested"):
            no_peer.append(f"{row.src}->{row.dst}")
    ids = sorted({i for key in cells for i in key})
    corner = {"gpu": "GPU", "cpu": "CPU"}.get(str(timer), "D\\D")
    for text in matrix_lines(ids, cells, ids, corner=corner):
        say(console, text)
    if halves:
        say(console, "   per direction (half of each printed sum):")
        for text in matrix_lines(ids, halves, ids, corner="D\\D"):
            say(console, text)
    if no_peer:
        say(console, f"   no peer access, copied through host memory: {', '.join(no_peer)}")


def render(rows: Iterable[Row], console: Any) -> None:
    """The matrices as p2pBandwidthLatencyTest prints them, latency ones labelled by
    timer, bidirectional ones with their per-direction halves; error rows in red."""
    group: list[Row] = []
    source = None
    for row in rows:
        key = (row.extra or {}).get("section"), (row.extra or {}).get("timer")
        if group and (row.source != group[0].source or key != (
            (group[0].extra or {}).get("section"), (group[0].extra or {}).get("timer")
        ) or row.status == "error"):  # fmt: skip
            _print_group(console, group)
            group = []
        if row.source != source:
            source = row.source
            say(console, f"{source}", style="bold")
        if row.status == "error" and row.algbw_gbps is None and row.time_us is None:
            say_error(console, row)
            continue
        group.append(row)
    if group:
        _print_group(console, group)
