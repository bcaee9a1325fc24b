"""nccl-tests' text output, read a line at a time into :class:`TestRun` objects.

A log may hold any number of tests concatenated, NCCL INFO/WARN lines and MPI messages
interleaved, and runs that failed or were cut off. :class:`TextReader` is fed one line at a
time and hands over each test when the next one starts or the log ends, so memory holds
one test, not the log. With ``hand_over=N`` it also hands over a test whose table reached
N unread lines (``done`` False): the reader of rows makes their rows and lets them go, so
a single endless table does not grow memory either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from gpulane.collectives.nccl_tests import header as hdr
from gpulane.collectives.nccl_tests.failures import failure_of, is_noise, warning_of
from gpulane.collectives.nccl_tests.model import ErrorEvent, TableLine, TestRun, resolve_op
from gpulane.collectives.nccl_tests.table import (
    FIELD_RE,
    Value,
    measurements,
    parse_columns,
    redop_blank,
    table_start,
    take,
    take_whole,
    to_int,
    whole_line,
)
from gpulane.errors import ParseError
from gpulane.topology.nccl_info import NcclLineReader

# Header stages: a header line of stage s starts a new test when the current one is at s.
_ST_JSON, _ST_VERSION, _ST_STARTING, _ST_NTHREAD, _ST_DEVICES = 0, 1, 2, 3, 4
_ST_TABLE, _ST_FOOTER, _ST_CONCLUDED = 5, 6, 7

_NUMBER_START_RE = re.compile(r"^\s*[-+]?\d")
_TOKEN_RE = re.compile(r"\S+")
# A launcher's tag before each line: ``mpirun --tag-output`` writes ``[1,0]<stdout>:``,
# ``srun -l`` writes ``0: `` (stripped where a table line or header follows it: a host named
# by a number, ``10: Test NCCL failure``, keeps its name).
_LAUNCHER_TAG_RE = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\s*\d+: (?=[#\s]))")


def strip_launcher_tag(line: str) -> str:
    """The line without the tag ``mpirun --tag-output`` or ``srun -l`` put before it."""
    return _LAUNCHER_TAG_RE.sub("", line, count=1)


NOT_NCCL_TESTS = (
    "not nccl-tests output: no '# nThread ...' header, no result table "
    "('#  size  count  type ... time  algbw  busbw') and no nccl-tests failure message"
)


class TextReader:
    """Push one line at a time with :meth:`feed`; :meth:`close` at the end. Tests that are
    ready (ended, or handed over early) collect in ``ready``."""

    def __init__(self, source: str, op: str | None = None, hand_over: int | None = None) -> None:
        self.source = source
        self.op = op  # the collective where the log does not name it
        self.hand_over = hand_over
        self.ready: list[TestRun] = []
        self.started = 0  # tests seen
        self.cur: TestRun | None = None
        self.hint_cmd: str | None = None
        self.pending: TableLine | None = None  # incomplete table line awaiting more tokens
        self.pending_values: list[Value] = []
        self.pending_cols: list[tuple[str, int]] = []  # the layout the pending line follows
        self.early_errors: list[ErrorEvent] = []
        self.number = 0  # the last line number fed
        self.last_hash = False  # the last line read was a '#' line
        self.early_nccl: NcclLineReader | None = None  # NCCL lines before the first test

    # -- runs
    def _new_run(self, lineno: int) -> TestRun:
        self._close_pending()
        if self.cur is not None:
            self._finish(self.cur, lineno - 1)
        run = TestRun(index=self.started, source=self.source, format="text", first_line=lineno)
        self.started += 1
        if self.hint_cmd:
            hdr.apply_command(run, self.hint_cmd)
            self.hint_cmd = None
        run.errors.extend(self.early_errors)
        self.early_errors = []
        run.nccl_reader, self.early_nccl = self.early_nccl, None
        self.cur = run
        return run

    def _run_for(self, stage: int, lineno: int) -> TestRun:
        cur = self.cur
        if cur is None or cur.stage >= stage:
            cur = self._new_run(lineno)
        cur.stage = stage
        return cur

    # -- main loop
    def feed(self, number: int, raw: str) -> None:
        self.number = number
        cur = self.cur
        if (
            cur is not None
            and cur.stage == _ST_TABLE
            and self.pending is None
            and cur.columns is not None
            and "NCCL" not in raw
        ):
            # Most lines of a log: a whole table line, as _table_line would read it (the same
            # TableLine: tests/collectives/nccl_tests/test_table_whole.py); a line with a
            # launcher tag, a NUL or other output is no match, and is read below.
            fast = whole_line(cur.columns.flat_cached, cur.columns, raw.rstrip("\r\n"))
            if fast is not None:
                self.last_hash = False
                fast.line = number
                cur.add_line(fast)
                self._ready_early(cur)
                return
        line = strip_launcher_tag(raw.replace("\x00", "").rstrip("\r\n"))
        stripped = line.strip()
        if not stripped:
            return
        if "NCCL" in line:
            self._nccl_line(line)
        self.last_hash = stripped.startswith("#")
        if self.last_hash:
            self._hash_line(stripped, number)
        elif not self._table_line(line, number):
            self._other_line(stripped, number)
        self._ready_early(self.cur)

    def _ready_early(self, cur: TestRun | None) -> None:
        """Hand over a run whose table reached ``hand_over`` lines (see the module)."""
        if (
            self.hand_over
            and cur is not None
            and self.pending is None
            and len(cur.lines) >= self.hand_over
        ):
            resolve_op(cur, self.source, self.op)
            self.ready.append(cur)

    def _nccl_line(self, line: str) -> None:
        """NCCL's own lines (NCCL_DEBUG=INFO) go to the test they were printed in: its
        connections fill the rows' transport. They are read on as before too (a WARN is
        a warning, an INFO line noise to the table)."""
        run = self.cur
        if run is None:
            self.early_nccl = self.early_nccl or NcclLineReader()
            self.early_nccl.feed(line)
            return
        if run.nccl_reader is None:
            run.nccl_reader = NcclLineReader()
        run.nccl_reader.feed(line)

    def close(self) -> None:
        """The log ended: hand over the last test, and a failure printed before any."""
        self._close_pending()
        if self.cur is None and any(e.kind in ("nccl", "cuda", "test") for e in self.early_errors):
            # A failure before any header (e.g. CUDA not initialised): a run of its own,
            # into which _new_run moves the early errors.
            self._new_run(self.early_errors[0].line or 1)
        if self.cur is not None:
            # Ended in the device list (no failure message after it): how many ranks ran
            # is unknown.
            self.cur.header.devices_cut = self.cur.stage == _ST_DEVICES and self.last_hash
            self._finish(self.cur, self.number)
            self.cur = None

    def damaged(self, err: ParseError) -> None:
        """The input cannot be read past ``err.line``: the last test ends there."""
        self._close_pending()
        self._add_event(ErrorEvent("damaged", err.reason, line=err.line))

    def take(self) -> list[TestRun]:
        out, self.ready = self.ready, []
        return out

    def _hash_line(self, s: str, i: int) -> None:
        m = hdr.JSON_OUT_RE.match(s)
        if m:
            self._run_for(_ST_JSON, i).header.json_output = m.group(1)
            return
        m = hdr.VERSION_RE.match(s)
        if m:
            run = self._run_for(_ST_VERSION, i)
            run.header.version = m.group(1)
            run.header.nccl_headers = to_int(m.group(2))
            run.header.nccl_library = to_int(m.group(3))
            return
        m = hdr.STARTING_RE.match(s)
        if m:
            run = self._run_for(_ST_STARTING, i)
            run.header.test = m.group(1)
            run.announced = True
            return
        if hdr.NTHREAD_RE.match(s):
            hdr.parse_nthread(s, self._run_for(_ST_NTHREAD, i).header)
            return
        m = hdr.RANK_RE.match(s)
        if m:
            cur = self.cur
            run = self._run_for(_ST_DEVICES, i) if cur is None or cur.stage > _ST_DEVICES else cur
            run.stage = _ST_DEVICES
            run.header.ranks.append(hdr.rank_of(m))
            return
        if "size" in s and "count" in s and "time" in s and "(B)" not in s:
            cols = parse_columns(s)
            if cols is not None:
                self._close_pending()
                run = self._run_for(_ST_TABLE, i)
                run.columns = cols
                return
        cur = self.cur
        if cur is None:
            return
        if hdr.apply_summary(s, cur):
            self._close_pending()
            cur.stage = max(cur.stage, _ST_FOOTER)
            return
        m = hdr.CONCLUDED_RE.match(s)
        if m:
            self._close_pending()
            cur.stage = _ST_CONCLUDED
            cur.concluded = True
            cur.header.test = cur.header.test or m.group(1)
            return
        m = hdr.REDUCING_RE.match(s)
        if m:
            cur.header.reduced_max_bytes = to_int(m.group(1))
            return
        m = hdr.ERROR_LINE_RE.match(s)
        if m:
            cur.last_error = m.group(1) or None
            return
        m = hdr.MEMORY_RE.match(s)
        if m:
            cur.memory = m.group(1)
            return
        if s.startswith("# Per-Iteration Report"):
            cur.header.per_iter = True
        elif s.startswith("# Blocking Enabled"):
            cur.header.blocking = s.lstrip("# ").strip()
        elif s.startswith("# Parallel Init Enabled"):
            cur.header.parallel_init = True
        elif s.strip("# ") == "..." and cur.stage <= _ST_DEVICES:
            cur.header.devices_elided = True

    def _other_line(self, s: str, i: int) -> None:
        if s == "...":
            if self.cur is not None and self.cur.stage <= _ST_DEVICES:
                self.cur.header.devices_elided = True
            return
        if self._failure(s, i, None):
            return
        if is_noise(s):
            return
        if hdr.PERF_CMD_RE.search(s) and not s.lstrip().startswith("#"):
            cur = self.cur
            if cur is not None and cur.stage < _ST_TABLE and not cur.op_hint:
                hdr.apply_command(cur, s)
            else:
                self.hint_cmd = s

    # -- failures
    def _failure(self, text: str, i: int, at: TableLine | None, placement: int = 0) -> bool:
        """Record a failure message found in ``text``; True when it was one."""
        warn = warning_of(text)
        if warn is not None:
            if self.cur is not None and len(self.cur.warnings) < 50:
                self.cur.warnings.append(warn)
            return True
        event = failure_of(text)
        if event is None:
            return False
        if event.kind == "test":
            # A stack line of the failure before it: a detail of that failure.
            run = self.cur
            errs = run.errors if run is not None else self.early_errors
            if errs and errs[-1].kind in ("nccl", "cuda", "test"):
                if len(errs[-1].details) < 8:
                    errs[-1].details.append(event.message)
                return True
        event.line = i
        if at is None and self.pending is not None:
            at = self.pending
            placement = len(at.results)
        if at is not None:
            event.size_bytes = at.size_bytes
            event.in_place = placement >= 1
        self._add_event(event)
        return True

    def _add_event(self, event: ErrorEvent) -> None:
        run = self.cur
        errors = self.early_errors if run is None else run.errors
        for old in errors:
            if old.kind == event.kind and old.message == event.message:
                old.count += 1
                return
        if event.kind == "abort":
            # One abort event per run; later lines of the same story are details.
            for old in errors:
                if old.kind == "abort":
                    if len(old.details) < 8 and event.message not in old.details:
                        old.details.append(event.message)
                    return
        if len(errors) < 100:
            errors.append(event)

    # -- table lines
    def _table_line(self, line: str, i: int) -> bool:
        run = self.cur
        if run is None or run.columns is None or run.stage != _ST_TABLE:
            return False
        if not _NUMBER_START_RE.match(line):
            return self.pending is not None and self._failure(line.strip(), i, None)
        cols = run.columns.flat_cached
        if self.pending is None:
            whole = take_whole(cols, line)
            if whole is None:
                cols = self._line_cols(line)
                whole = take_whole(cols, line) if cols is not run.columns.flat_cached else None
            if whole is not None:
                tl = table_start(whole)
                tl.line = i
                self._emit(tl, whole, complete=True)
                return True
        toks = [(m.group(0), m.start(), m.end()) for m in _TOKEN_RE.finditer(line)]
        # A continuation of a line cut by interleaved output?
        if self.pending is not None:
            pcols = self.pending_cols
            start = len(self.pending_values)
            taken, rest = take(pcols[start:], toks, line)
            if taken and not rest.strip():
                self.pending_values += taken
                if len(self.pending_values) == len(pcols):
                    self._emit(self.pending, self.pending_values, complete=True)
                    self.pending = None
                    self.pending_values = []
                return True
            cols = self._line_cols(line)
        taken, rest = take(cols, toks, line)
        if len(taken) < 3:  # not even size, count, type: some other message
            return False
        self._close_pending()
        tl = table_start(taken)
        tl.line = i
        if len(taken) == len(cols):
            tail = rest.strip()
            extra = tail.split()
            if extra and all(FIELD_RE.match(t) for t in extra):
                # More fields than the header names: a column name is missing or damaged,
                # and the values after it would land in the wrong columns. Report the
                # line instead of reading it.
                self._add_event(
                    ErrorEvent(
                        "damaged",
                        f"the line for {tl.size_bytes} B holds {len(cols) + len(extra)} "
                        f"fields, its table header names {len(cols)} columns",
                        line=i,
                        size_bytes=tl.size_bytes,
                    )
                )
                return True
            self._emit(tl, taken, complete=True)
            if tail:
                self._failure(tail, i, None)
            return True
        # Incomplete: a failure (or other output) interrupted the line, or the log ends.
        self._emit(tl, taken, complete=False)
        tail = rest.strip()
        if tail and self._failure(tail, i, tl, len(tl.results)):
            return True
        self.pending = tl
        self.pending_values = taken
        self.pending_cols = cols
        return True

    def _line_cols(self, line: str) -> list[tuple[str, int]]:
        """The layout a table line follows: the header's, or the header's without the
        redop column where the line leaves it blank (older nccl-tests)."""
        run = self.cur
        assert run is not None and run.columns is not None
        cols = run.columns.flat_cached
        blank = run.columns.flat_blank_redop
        if blank is not None and redop_blank(cols, line):
            return blank
        return cols

    def _emit(self, tl: TableLine, values: list[Value], complete: bool) -> None:
        """Fill tl.results from the parsed values; add tl to the run once."""
        run = self.cur
        assert run is not None and run.columns is not None
        tl.results = measurements(values, run.columns)
        tl.complete = complete
        stamp = [v for c, _, v, _ in values if c in ("date", "clock")]
        if len(stamp) == 2:
            tl.timestamp = f"{stamp[0]} {stamp[1]}"
        if run.last_line is not tl:
            run.add_line(tl)

    def _close_pending(self) -> None:
        if self.pending is None:
            return
        tl = self.pending
        self.pending = None
        self.pending_values = []
        run = self.cur
        if run is None:
            return
        if not any(
            e.size_bytes == tl.size_bytes and e.line and e.line >= tl.line for e in run.errors
        ):
            where = "in-place" if len(tl.results) >= 1 else "out-of-place"
            self._add_event(
                ErrorEvent(
                    "cut_off",
                    f"the line for {tl.size_bytes} B stops before its {where} result",
                    line=tl.line,
                    size_bytes=tl.size_bytes,
                    in_place=len(tl.results) >= 1,
                )
            )

    # -- end of a run
    def _finish(self, run: TestRun, last_number: int) -> None:
        """The run ended at line ``last_number``: say so if it was cut off; hand it over."""
        resolve_op(run, self.source, self.op)
        run.done = True
        self.ready.append(run)
        if run.errors:
            return
        last = run.last_line
        if run.columns is None:
            what = "before its result table"
        elif last is None:
            what = "right after its table header, before the first size"
        elif not run.finished:
            what = f"after {last.size_bytes} B, before the '# Out of bounds values' summary"
        elif not run.avg_read:
            what = "after '# Out of bounds values', before '# Avg bus bandwidth'"
        elif run.announced and not run.concluded:
            # It said '# Collective test starting', so it would say it concluded.
            what = "after its summary, before '# Collective test concluded'"
        else:
            return
        run.errors.append(
            ErrorEvent("cut_off", f"the output ends {what}", line=max(last_number, 1))
        )


def _cut_last_token(
    lines: Iterable[tuple[int, str]], terminated: bool
) -> Iterator[tuple[int, str]]:
    """The lines; when the last one has no line end (the file was cut there), without its
    last token, which may be the head of a longer one (``19.1`` of ``19.12``)."""
    held: tuple[int, str] | None = None
    try:
        for item in lines:
            if held is not None:
                yield held
            held = item
    except ParseError:
        if held is not None:  # a whole line: the damage is past its end
            yield held
        raise
    if held is None:
        return
    number, line = held
    if not terminated and line[-1:].strip():
        line = line[: len(line) - len(line.split()[-1])]
    yield number, line


def iter_text_runs(
    lines: Iterable[tuple[int, str]],
    source: str,
    op: str | None = None,
    hand_over: int | None = None,
    terminated: bool = True,
) -> Iterator[TestRun]:
    """The tests of (line number, line) pairs as they end; ParseError when there are none.
    A run handed over early (``done`` False) comes again with its later lines.
    ``terminated`` False: the last line had no line end, and its last token is dropped."""
    reader = TextReader(source, op, hand_over)
    try:
        for number, line in _cut_last_token(lines, terminated):
            reader.feed(number, line)
            if reader.ready:
                yield from reader.take()
    except ParseError as err:
        # The file is damaged past its start (bad bytes, cut UTF-16): what came before
        # stands, and the test being read says where and why it stops.
        if not reader.started:
            raise
        reader.damaged(err)
    reader.close()
    yield from reader.take()
    if not reader.started:
        raise ParseError(NOT_NCCL_TESTS, source)


def parse_text(text: str, source: str = "<text>", op: str | None = None) -> list[TestRun]:
    """The tests in an nccl-tests text log; ParseError when there are none."""
    lines = enumerate(text.splitlines(), start=1)
    return list(iter_text_runs(lines, source, op, terminated=text.endswith(("\n", "\r"))))
