"""`gpulane parse nvbandwidth FILE...`: nvbandwidth's testcase matrices as copy rows.

Every row keeps its testcase (``extra.test``, e.g. ``device_to_device_memcpy_read_ce``),
the matrix title as printed (``extra.title``), the copy engine (``extra.engine``: CE or
SM) and the ``SUM`` nvbandwidth printed under the matrix (``extra.sum_gbps``); the
printout shows each testcase's matrix as the tool prints it. nvbandwidth prints the
measured direction's bandwidth, also for bidirectional testcases (the other direction is
the interference); newer versions add ``Read1``/``Read2``/``Total`` matrices, kept apart
by ``extra.matrix``.

Cells that hold no measurement never become rows: ``N/A``, the diagonal of a GPU x GPU
matrix (nvbandwidth never copies a GPU to itself there; newer builds print ``0.00`` on
it, see its README), and any ``0.00`` (nvbandwidth's own average counts only cells above
0, inline_common.h).

nvbandwidth stops on its own failures (error_handling.h): ``ASSERT in expression ...``
(after ``Invalid value when checking the pattern``: the copied data did not match),
``[CUDA_ERROR_...] ... in expression ...``, ``NVML_ERROR: ...``, or a crash
(``Aborted (core dumped)``). Such a stop is one error row that quotes it, never a file
cut short.

Lines are read one at a time; a matrix's rows are given out when its ``SUM`` line
arrives (at most one matrix is held). A file that ends inside a matrix, before its SUM
line, or right after a ``Running`` line gets an error row naming the line.

A matrix pasted without its ``Running <testcase>.`` line (nvbandwidth#50) is read too.
Its heading alone cannot name it (host_to_device_memcpy_ce and host_to_all_memcpy_ce
both print ``memcpy CE CPU(row) -> GPU(column) ...``, testcases_ce.cpp), but the ``SUM
<testcase>`` line under it does: its rows wait for that line. Cut before it, the matrix
is one error row and none of its cells a row. ``> Running`` (quoted) and ``Running
benchmark X.`` (an early README) are Running lines; ``Waiving X.`` (v0.1-v0.2) is a
testcase not run.

A cut that falls exactly between two testcases: nvbandwidth announces no list of
testcases, but from v0.6 on it prints a closing ``NOTE: The reported results may not
reflect ...`` after its last testcase (output.cpp ``printInfo``, called at the end of
``main``; it exits before it on a failure, error_handling.h). An output of v0.6 or later
that ends without that note gets one error row naming the last testcase read (so does a
run of a log of several runs, where the next run's header starts). Before
v0.6 the note came first (``NOTE: This tool reports current measured bandwidth``), so
an output of v0.1-v0.5, or one whose version line is not in the file, cannot be told
from one cut right after a testcase's ``SUM`` line.
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
    copy_row,
    default_build,
    error_row,
    file_lines,
    text_lines,
)
from gpulane.transfers.importers.nvbandwidth_print import render

__all__ = ["OPTIONS", "WHAT", "parse_nvbandwidth", "render", "rows_from_lines", "stream_rows"]

WHAT = "nvbandwidth (every testcase's matrix; CE and SM copies)"
OPTIONS: dict[str, str] = {}
BACKEND = "nvbandwidth"

# "> Running" as quoted in issues; "Running benchmark X." as the first release printed it
_RUNNING = re.compile(r"^\s*(?:>\s*)?Running\s+(?:benchmark\s+)?(\S+?)\.?\s*$")
_WAIVING = re.compile(r"^\s*Waiving\s+(\S+?)\.?\s*$")  # v0.1-v0.2: a testcase not run
_CLOSING = re.compile(r"^\s*NOTE: The reported results may not reflect")  # v0.6+: the end
# A matrix heading names a CPU or GPU by row or column (every nvbandwidth title does).
_HEADING = re.compile(r"\b(?:GPU|CPU)\((?:row|column)s?\)")
_PART_KEY = re.compile(r"_(?:read1|read2|write1|write2|total)$")
_STATUS = re.compile(r"^\s*(Waived|Error|ERROR|WAIVED)\s*:\s*(.*)$")
_TITLE = re.compile(r"^\s*(.*?\S)\s*\((GB/s|ns|us)\)\s*$")
_SUM = re.compile(r"^\s*(?:SUM|&&&& PERF)\s+(\S+)\s+(\S+?)(?:GB/s|ns|us)?\s*$")
_COLUMNS = re.compile(r"^\s*(\d+(?:\s+\d+)*)\s*$")
_DEVICE = re.compile(r"^\s*Device\s+(\d+):\s*(.+?)(?:\s+\(([0-9a-fA-F:.]+)\))?\s*$")
# nvbandwidth's failure lines: details (the data check's report) and the line it stops on.
_FAIL_DETAIL = re.compile(r"^(?:Invalid value when checking the pattern|Current offset)\b")
_FAIL_END = re.compile(
    r"^(?:(?P<assert>ASSERT in expression)|(?P<cuda>\[(?:CUDA_ERROR_\w+|cuda\w+)\] )|"
    r"(?P<nvml>NVML_ERROR: )|(?P<crash>Aborted\b|Segmentation fault\b|terminate called\b))"
)
_VERSIONS = {
    "nvbandwidth Version:": "nvbandwidth",
    "CUDA Runtime Version:": "cuda_runtime",
    "CUDA Driver Version:": "cuda_driver",
    "Driver Version:": "driver",
}


def direction(test: str, title: str) -> tuple[str, bool, str] | None:
    """(op, bidirectional, orientation) of a testcase; None when it is not one gpulane knows.

    orientation says how a cell (row r, column c) maps to src -> dst: ``host-col`` (host and
    GPU c), ``row-col`` (GPU r -> GPU c), ``col-row`` (GPU c -> GPU r), ``all-col`` (every
    GPU -> GPU c), ``col-all`` (GPU c -> every GPU), ``local-col`` (within GPU c).
    """
    name = test.lower()
    bidir = "bidirectional" in name
    if name.startswith(("host_to_device", "host_to_all", "host_device_latency")):
        return "h2d", bidir, "host-col"
    if name.startswith(("device_to_host", "all_to_host")):
        return "d2h", bidir, "host-col"
    if name.startswith("all_to_one"):
        return "p2p", bidir, "all-col"
    if name.startswith("one_to_all"):
        return "p2p", bidir, "col-all"
    if name.startswith("device_local_copy"):
        return "d2d", False, "local-col"
    if name.startswith("device_to_device"):
        arrow = re.search(r"GPU\(row\)\s*(<->|->|<-)\s*GPU\(column\)", title)
        if arrow and arrow.group(1) == "<-":
            return "p2p", bidir, "col-row"
        return "p2p", bidir, "row-col"
    return None


@dataclass
class _Matrix:
    test: str | None  # None: no Running line named it; its SUM line will
    title: str
    unit: str
    line: int
    cols: list[int] = field(default_factory=list)
    rows_read: int = 0
    ended: bool = False  # the blank line after the rows came
    held: list[Row] = field(default_factory=list)
    raw: list[tuple[int, int, list[str]]] = field(default_factory=list)  # unnamed: cells

    @property
    def expected_rows(self) -> int:
        return len(self.cols) if "GPU(row)" in self.title else 1


class _State:
    def __init__(self, source: str, run_id: str, build: str) -> None:
        self.source, self.run_id, self.build = source, run_id, build
        self.models: dict[int, str] = {}
        self.versions: dict[str, str] = {}
        self.test: str | None = None
        self.matrices = 0  # matrices of the current testcase
        self.matrix: _Matrix | None = None
        self.tests = 0  # testcases announced (Running, or a status line)
        self.failure: list[tuple[int, str]] = []  # failure details not yet reported
        self.closed = False  # v0.6+'s closing NOTE came (after the last testcase)
        self.last_test: str | None = None  # the last testcase whose end was read

    def cut(self, line: int, what: str, test: str | None = None) -> Row:
        test = test or self.test
        extra = {"test": test} if test else {}
        return error_row(self.run_id, BACKEND, self.source, self.build, line, what, **extra)

    def rows_of(self, m: _Matrix, number: int, r: int, cells: list[str]) -> list[Row]:
        if m.test is None:  # named by its SUM line: the cells wait for it
            m.raw.append((number, r, cells))
            return []
        how = direction(m.test, m.title)
        if how is None:
            return []
        op, bidir, orient = how
        out = []
        for c, cell in zip(m.cols, cells, strict=True):
            value = cell_value(cell, self.source, number)
            if not value or (r == c and orient in ("row-col", "col-row")):
                continue  # a placeholder (N/A, 0.00, the diagonal): nothing was measured
            src, dst = {
                "host-col": ("host", f"GPU{c}") if op == "h2d" else (f"GPU{c}", "host"),
                "row-col": (f"GPU{r}", f"GPU{c}"),
                "col-row": (f"GPU{c}", f"GPU{r}"),
                "all-col": ("all", f"GPU{c}"),
                "col-all": (f"GPU{c}", "all"),
                "local-col": (f"GPU{c}", f"GPU{c}"),
            }[orient]
            engine = re.search(r"\b(CE|SM)\b", m.title)
            part = re.search(r"\b(Read1|Read2|Write1|Write2|Total)\b", m.title)
            extra: dict[str, Any] = {
                "test": m.test,
                "title": m.title,
                "engine": engine.group(1) if engine else None,
                "row": r,
                "col": c,
                "line": number,
            }
            if part:
                extra["matrix"] = part.group(1)
            if m.test.lower().startswith(("host_to_all", "all_to_host")):
                extra["concurrent"] = "all"
            gpu = int(dst[3:]) if dst.startswith("GPU") else c
            if gpu in self.models:
                extra["gpu_model"] = self.models[gpu]
            fields: dict[str, Any] = {}
            if m.unit == "GB/s":
                fields["algbw_gbps"] = value
            else:
                fields["time_us"] = value / 1000 if m.unit == "ns" else value
                extra["test_kind"] = "latency"
                extra["printed_latency"] = value
                extra["unit"] = m.unit
            out.append(
                copy_row(
                    self.run_id, BACKEND, self.source, self.build, op=op, src=src, dst=dst,
                    memory="device" if op in ("p2p", "d2d") else "pinned",
                    peer_access=True if op == "p2p" else None, bidirectional=bidir,
                    world_size=len(self.models) or None, versions=dict(self.versions),
                    extra=extra, **fields,
                )
            )  # fmt: skip
        return out

    def matrix_line(self, number: int, line: str) -> bool:
        """Take the open matrix's column numbers or one of its rows; False for any other
        line (which ends the matrix's rows)."""
        m = self.matrix
        if m is None or m.ended:
            return False
        parts = line.split()
        if not m.cols:
            if not _COLUMNS.match(line):
                raise ParseError("expected a row of column numbers under the title",
                                 self.source, number)  # fmt: skip
            m.cols = [int(c) for c in parts]
            return True
        if parts and parts[0].isdigit():
            if len(parts) != len(m.cols) + 1:
                raise ParseError(f"matrix row has {len(parts) - 1} values for {len(m.cols)} "
                                 "columns", self.source, number)  # fmt: skip
            m.held += self.rows_of(m, number, int(parts[0]), parts[1:])
            m.rows_read += 1
            return True
        m.ended = True
        return False

    def title(self, line: str, unit: str, number: int) -> Iterator[Row]:
        """A matrix heading: the open matrix's rows end, a new matrix opens."""
        if self.matrix is not None:
            yield from self.unfinished(number, f"another matrix starts at line {number}")
        self.matrix = _Matrix(self.test, line, unit, number)
        self.matrices += 1
        if self.test is None:  # no Running line: its SUM line names it
            self.tests, self.closed = self.tests + 1, False
        elif direction(self.test, line) is None:
            self.matrix.held.append(
                self.cut(number, f"testcase {self.test}: gpulane does not know what it "
                         "copies where; its matrix is not imported", self.test)
            )  # fmt: skip

    def sum_line(self, key: str, value: str, number: int) -> Iterator[Row]:
        """The open matrix's rows when ``SUM key value`` is its own (a matrix with no
        Running line takes its testcase from the key)."""
        m = self.matrix
        if m is None or not (m.test is None or key == m.test or key.startswith(m.test + "_")):
            return
        if m.test is None:
            m.test = _PART_KEY.sub("", key) if _PART_KEY.search(key) else key
            if direction(m.test, m.title) is None:
                m.held.append(self.cut(m.line, f"testcase {m.test}: gpulane does not know "
                                       "what it copies where; its matrix is not imported"))  # fmt: skip
            for at, r, cells in m.raw:
                m.held += self.rows_of(m, at, r, cells)
        total = cell_value(value, self.source, number)
        for row in m.held:
            if row.status == "ok":
                row.extra["sum_gbps" if m.unit == "GB/s" else "sum"] = total
                row.extra["sum_key"] = key
        yield from m.held
        self.matrix, self.last_test = None, m.test

    def run_ends(self, number: int) -> Iterator[Row]:
        """Where a log holds several runs (one after another, each with its header), what
        the run before line ``number`` lacks: its open matrix, or v0.6+'s closing NOTE."""
        said = False
        for row in self.unfinished(number, f"another run starts at line {number}"):
            said = said or row.status == "error"
            yield row
        version = self.versions.get("nvbandwidth")
        if self.tests and not said and not self.closed and _closes(version):
            after = f"testcase {self.last_test}" if self.last_test else "its last testcase"
            yield self.cut(number, f"the run before line {number} ends after {after} "
                           f"without the closing NOTE that nvbandwidth {version} prints: "
                           "cut off", self.last_test)  # fmt: skip
        self.test, self.matrices, self.closed = None, 0, False

    def waived(self, test: str, number: int) -> Row:
        """v0.1-v0.2's ``Waiving <testcase>.``: the testcase named, not run."""
        self.test, self.matrices, self.last_test = None, 0, test
        self.tests += 1
        return error_row(
            self.run_id, BACKEND, self.source, self.build, number,
            f"nvbandwidth did not run testcase {test}: Waiving (its peers or engines are not "
            "available on this machine)", event="waived", test=test,
        )  # fmt: skip

    def fail(self, number: int, line: str) -> Iterator[Row]:
        """A failure line: held when it is a detail, else the open matrix's complete rows
        and one error row quoting the failure (and its details)."""
        if _FAIL_DETAIL.match(line):
            self.failure.append((number, line))
            return
        yield from self.flush_failure(number, line)

    def flush_failure(self, number: int | None = None, line: str | None = None) -> Iterator[Row]:
        """Report the failure held (and ``line``, the line nvbandwidth stopped on)."""
        if line is None and not self.failure:
            return
        details = [text for _, text in self.failure]
        at = number if number is not None else self.failure[0][0]
        self.failure = []
        end = _FAIL_END.match(line or "")
        kind = (end.lastgroup if end else None) or "data_mismatch"
        if details and details[0].startswith("Invalid value"):
            what = "the copied data did not match what was written (nvbandwidth's data check)"
            kind = "data_mismatch"
        else:
            what = {
                "assert": "an ASSERT failed",
                "cuda": "a CUDA call failed",
                "nvml": "an NVML call failed",
                "crash": "the process crashed",
            }[kind]
        quoted = "; ".join(repr(t[:300]) for t in [*details, *([line] if line else [])])
        m = self.matrix
        if m is not None:
            yield from m.held  # the matrix lines printed before the stop were measured
        test = (m.test if m is not None else None) or self.test
        where = f"testcase {test}" if test else "nvbandwidth"
        yield error_row(
            self.run_id, BACKEND, self.source, self.build, at,
            f"{where}: nvbandwidth stopped: {what}: {quoted}",
            event=kind, **({"test": test} if test else {}),
        )  # fmt: skip
        # It exits after a failure (before its closing NOTE): nothing is missing beyond it.
        self.matrix, self.test, self.matrices, self.closed = None, None, 0, True

    def unfinished(self, line: int, context: str) -> Iterator[Row]:
        """The open matrix's rows, and an error row for what it still lacked, when the
        output stops or the next testcase starts."""
        m, test = self.matrix, self.test
        self.matrix = None
        if m is not None and m.test is None:
            yield self.cut(
                line,
                f"a matrix with no Running line before it ('{m.title}', line {m.line}): "
                f"{context} before the SUM line that names its testcase; its cells are not "
                "imported",
            )
        elif m is not None:
            yield from m.held
            if not m.cols:
                what = f"before the column numbers of '{m.title}'"
            elif m.rows_read < m.expected_rows:
                what = f"after {m.rows_read} of {m.expected_rows} rows of '{m.title}'"
            else:
                what = f"before the SUM line of '{m.title}'"
            yield self.cut(line, f"testcase {m.test}: {context} {what}", m.test)
        elif test is not None and self.matrices == 0:
            yield self.cut(line, f"testcase {test}: {context} before its matrix", test)


def rows_from_lines(
    lines: Iterable[Line], source: str, run_id: str = "import", build: str | None = None
) -> Iterator[Row]:
    """Rows of one nvbandwidth printout; :class:`ParseError` when it is not one."""
    st = _State(source, run_id, build or default_build(source))
    last = 0
    cut: tuple[int, str] | None = None
    for number, raw, ended in lines:
        last = number
        line = raw.strip()
        if line and (_FAIL_END.match(line) or _FAIL_DETAIL.match(line)):
            # Even cut short, a failure line names what nvbandwidth stopped on.
            yield from st.fail(number, line)
            continue
        if line and st.failure:
            yield from st.flush_failure()
        if line and not ended:
            # The last line of a cut file: nothing on it can be trusted.
            cut = (number, line)
            break
        if st.matrix_line(number, line):
            continue
        if not line:
            continue
        if s := _SUM.match(line):
            yield from st.sum_line(s.group(1), s.group(2), number)
            continue
        if _CLOSING.match(line):
            st.closed = True
            continue
        if r := _RUNNING.match(line):
            yield from st.unfinished(number, f"the next testcase starts at line {number}")
            st.test, st.matrices, st.closed = r.group(1), 0, False
            st.tests += 1
            continue
        if w := _WAIVING.match(line):
            yield from st.unfinished(number, f"the next testcase starts at line {number}")
            yield st.waived(w.group(1), number)
            continue
        if t := _STATUS.match(line):
            # After "Running X." and before X's matrix, the status is X's; nvbandwidth
            # prints a waived testcase's status without naming it.
            named = st.test if st.matrices == 0 and st.matrix is None else None
            if st.matrix is not None:
                yield from st.unfinished(
                    number, f"nvbandwidth reported {t.group(1)} at line {number}"
                )
            what = f"testcase {named}" if named else "a testcase (the output does not name it)"
            yield error_row(
                st.run_id, BACKEND, source, st.build, number,
                f"nvbandwidth did not run {what}: {t.group(1)}: {t.group(2) or 'no reason given'}",
                event=t.group(1).lower(), **({"test": named} if named else {}),
            )  # fmt: skip
            st.test, st.last_test = None, named or st.last_test
            st.tests += 1
            continue
        if (t := _TITLE.match(line)) and (st.test is not None or _HEADING.search(line)):
            yield from st.title(line, t.group(2), number)
            continue
        for prefix, key in _VERSIONS.items():
            if line.startswith(prefix):
                if key == "nvbandwidth":  # another run's header: the one before it ended
                    yield from st.run_ends(number)
                st.versions[key] = line[len(prefix) :].strip()
                break
        else:
            if d := _DEVICE.match(line):
                st.models[int(d.group(1))] = d.group(2)
    if not st.tests:
        raise ParseError("no nvbandwidth testcase found", source, last or None)
    yield from st.flush_failure()
    yield from _ending(st, last, cut)


def _ending(st: _State, last: int, cut: tuple[int, str] | None) -> Iterator[Row]:
    """What the open testcase still lacks where the output ends (or was cut)."""
    if cut is None:
        said = False
        for row in st.unfinished(last, f"the output ends at line {last}"):
            said = said or row.status == "error"
            yield row
        if not said and not st.closed and _closes(st.versions.get("nvbandwidth")):
            after = f"after testcase {st.last_test}" if st.last_test else "after its last testcase"
            yield st.cut(last, f"the output ends at line {last} {after} without the closing "
                         f"NOTE that nvbandwidth {st.versions['nvbandwidth']} prints after its "
                         "last testcase: cut off", st.last_test)  # fmt: skip
        return
    number, text = cut
    reported = False
    for row in st.unfinished(number, f"the file ends inside line {number} ({text[:60]!r})"):
        reported = reported or row.status == "error"
        yield row
    if not reported:
        yield st.cut(number, f"the file ends inside line {number} ({text[:60]!r}): cut off")


def _closes(version: str | None) -> bool:
    """Whether this nvbandwidth version prints its NOTE at the end (v0.6 on)."""
    m = re.match(r"v?(\d+)\.(\d+)", version or "")
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (0, 6)


def stream_rows(
    path: str, *, run_id: str | None, build: str | None, **options: str | None
) -> Iterator[Row]:
    """The importer contract (gpulane.session.imports): rows of one file, as they are read."""
    return rows_from_lines(file_lines(path), str(path), run_id or "import", build)


def parse_nvbandwidth(text: str, source: str = "<text>", run_id: str = "import") -> list[Row]:
    """Rows of nvbandwidth output already in memory."""
    return list(rows_from_lines(text_lines(text), source, run_id))
