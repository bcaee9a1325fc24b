"""The result record: one tidy row per measured point, shared by every backend and run type.

Rows are appended to ``rows.jsonl`` as they are measured (one ``write`` + flush + fsync per
row, so a crash never loses a finished point); ``rows.parquet`` is the tabular copy written
at the end (see DESIGN.md, "Result record").
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import operator
import os
import socket
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from gpulane import row_kinds
from gpulane.errors import print_warning
from gpulane.runfacts import (
    FACTS_JSONL,
    FACTS_KEY,
    FactsReader,
    RunFacts,
    SharedText,
    join,
)

# Re-exported: rows are made with them (importers, rundir).
from gpulane.shaping_env import ENV_PREFIXES as ENV_PREFIXES
from gpulane.shaping_env import GPULANE_SET_ENV as GPULANE_SET_ENV
from gpulane.shaping_env import shaping_env as shaping_env

ROWS_JSONL = "rows.jsonl"
ROWS_PARQUET = "rows.parquet"

KINDS = ("collective", "copy", "tokens")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(label: str | None = None) -> str:
    """A run id that sorts by time and never collides: 20261122-001512-host-3f2a91c0."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    host = (label or socket.gethostname().split(".")[0]).replace("/", "-")
    # 8 hex digits: 4 collided about once in 50 runs made in one second (2 % a test run)
    return f"{stamp}-{host}-{uuid.uuid4().hex[:8]}"


@dataclass
class Row:
    """One measured point. Fields that a run type does not have stay None."""

    run_id: str
    kind: str
    backend: str
    op: str
    started_at: str = field(default_factory=utc_now)
    build: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    host: str | None = None
    nodes: int | None = 1
    world_size: int | None = None
    # collective
    dtype: str | None = None
    redop: str | None = None
    root: int | None = None
    in_place: bool | None = None
    size_bytes: int | None = None
    count: int | None = None
    graph: bool | None = None
    iters: int | None = None
    time_us: float | None = None
    time_us_p50: float | None = None
    time_us_p99: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    wrong: int | None = None
    # copy
    bidirectional: bool | None = None
    memory: str | None = None  # pageable, pinned, pinned-wc, device
    src: str | None = None  # "host", "GPU0", ...
    dst: str | None = None
    peer_access: bool | None = None
    expected_gbps: float | None = None
    efficiency: float | None = None
    # tokens
    model: str | None = None
    tp: int | None = None
    pp: int | None = None
    batch: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    layers: int | None = None
    tokens_per_s: float | None = None
    ttft_ms: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    comm_share: float | None = None
    # where the row came from and what shaped it
    path: str | None = None
    source: str | None = None  # "measured", or the file a row was imported from
    env: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    # What NCCL actually used between the ranks, from its own INFO lines (P2P/CUMEM, SHM,
    # NET/IB/GDRDMA, ... joined by "+"); details in extra["nccl"]; None when unknown.
    transport: str | None = None
    status: str = "ok"
    error: str | None = None

    # One constructor per kind (gpulane.row_kinds): Row.collective(...), .copy(), .tokens()
    collective: ClassVar[classmethod[Row, ..., Row]] = classmethod(row_kinds.collective)
    copy: ClassVar[classmethod[Row, ..., Row]] = classmethod(row_kinds.copy)
    tokens: ClassVar[classmethod[Row, ..., Row]] = classmethod(row_kinds.tokens)

    def to_dict(self) -> dict[str, Any]:
        # What dataclasses.asdict gives, without its generic recursion: that was most of
        # the time of printing or writing a large import's rows.
        return {name: _copied(getattr(self, name)) for name in FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        """A row from its dict (``to_dict``, a rows.jsonl line); keys that are not fields go
        into ``extra``."""
        known = {k: v for k, v in data.items() if k in _FIELD_SET}
        unknown = {k: v for k, v in data.items() if k not in _FIELD_SET}
        row = cls(**known)
        if unknown:
            row.extra = {**(row.extra or {}), **unknown}
        return row


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Row))
_FIELD_SET = frozenset(FIELDS)
# The fields without a default: a line read back that lacks one (written by hand, or by
# an old gpulane) gets None rather than being lost.
_REQUIRED = {
    f.name: None
    for f in dataclasses.fields(Row)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
}


def row_of(data: dict[str, Any]) -> Row:
    """The Row of a dict read back (a rows.jsonl line, joined with its facts).

    A line as gpulane writes it holds exactly the fields: the dict becomes the row's
    attributes as it is (no copy, no keyword call), which keeps reading a large import's
    rows as fast as reading the dicts was. Any other dict goes through
    :meth:`Row.from_dict` (unknown keys into ``extra``)."""
    if len(data) == len(FIELDS) and data.keys() == _FIELD_SET:
        row = object.__new__(Row)
        row.__dict__ = data
        return row
    missing = [name for name in _REQUIRED if name not in data]
    return Row.from_dict({**dict.fromkeys(missing), **data} if missing else data)


_NESTED = (dict, list, tuple)


def _copied(value: Any) -> Any:
    """A copy of a field's JSON-like value (dicts and lists copied all the way down)."""
    if isinstance(value, dict):
        return {k: _copied(v) if isinstance(v, _NESTED) else v for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) if isinstance(v, _NESTED) else v for v in value)
    return value


_JSON_COLUMNS = ("env", "versions", "extra")
_EXTRA = FIELDS.index("extra")
# The fields that name a run rather than a point: rows that share them (and the nested
# facts in ``extra``) share one entry of facts.jsonl (see gpulane.runfacts).
RUN_FIELDS = (
    "run_id",
    "kind",
    "backend",
    "op",
    "started_at",
    "build",
    "host",
    "nodes",
    "world_size",
    "graph",
    "iters",
    "path",
    "source",
    "env",
    "versions",
)
_FIELD_VALUES = operator.attrgetter(*FIELDS)  # a Row's values, in FIELDS order


class _Encoder:
    """``encoder.encode``, its C encoder made once rather than once per call (a large
    import encodes a few small dicts per row: making it was most of their time). The
    text is the same: ``encode`` runs this very C encoder, with the same arguments."""

    def __init__(self, encoder: json.JSONEncoder) -> None:
        self._encoder = encoder
        self._make()

    def _make(self) -> None:
        e = self._encoder
        make = getattr(json.encoder, "c_make_encoder", None)
        self._c = (
            None
            if make is None or e.indent is not None
            else make(
                {} if e.check_circular else None,
                e.default,
                json.encoder.encode_basestring_ascii
                if e.ensure_ascii
                else json.encoder.encode_basestring,
                e.indent,
                e.key_separator,
                e.item_separator,
                e.sort_keys,
                e.skipkeys,
                e.allow_nan,
            )
        )

    def __call__(self, value: Any) -> str:
        if self._c is None:
            return self._encoder.encode(value)
        try:
            return "".join(self._c(value, 0))
        except BaseException:
            self._make()  # its circular-reference marks may hold what the failure left
            raise


# One encoder each (json.dumps with options builds a new one per call).
_ENCODE = _Encoder(json.JSONEncoder(default=str))
_ENCODE_SORTED = _Encoder(json.JSONEncoder(sort_keys=True, default=str))
# Row lines that hold only a row's own values: no spaces (they are most of such a line).
_ENCODE_COMPACT = _Encoder(json.JSONEncoder(default=str, separators=(",", ":")))
# The same text for a row's line (RunFacts.line: flat values, a small dict of its own in
# extra), without the check for a dict that holds itself (a mark per dict encoded).
_ENCODE_LINE = _Encoder(json.JSONEncoder(default=str, separators=(",", ":"), check_circular=False))

_C_LINE = _ENCODE_LINE._c  # see RowWriter.write_line


def rows_file(run_dir: str | os.PathLike[str]) -> Path:
    """A run directory's rows (JSON Lines)."""
    return Path(run_dir) / ROWS_JSONL


def parquet_file(run_dir: str | os.PathLike[str]) -> Path:
    """A run directory's tabular copy of its rows."""
    return Path(run_dir) / ROWS_PARQUET


def facts_file(run_dir: str | os.PathLike[str]) -> Path:
    """A run directory's facts shared by its rows (see gpulane.runfacts)."""
    return Path(run_dir) / FACTS_JSONL


def run_facts(run_dir: str | os.PathLike[str]) -> RunFacts:
    """The facts of an imported run, for its RowWriter and ParquetRows to share."""
    return RunFacts(run_dir, FIELDS, RUN_FIELDS, _ENCODE_COMPACT)


# What a run's rows share in ``extra``: NCCL's own account of the run, the hosts, the
# other processes found on its GPUs, why a placement is not measured. A row's other nested
# values (a tokens row's phases, a copy's per-GPU detail) stay on the row.
OWN_RUN_EXTRA = ("nccl", "hosts", "foreign", "not_measured", "nccl_tests")


def own_run_facts(run_dir: str | os.PathLike[str]) -> RunFacts:
    """The facts of one of gpulane's own runs (its leading rank the one writer): what
    every row shares (versions, env, NCCL's summary, hosts) is written once to
    facts.jsonl, and a resumed run numbers on after the facts it wrote before."""
    return RunFacts(
        run_dir, FIELDS, RUN_FIELDS, _ENCODE_COMPACT, append=True, shared_keys=OWN_RUN_EXTRA
    )


def own_rows_writer(run_dir: str | os.PathLike[str]) -> RowWriter:
    """The leading rank's writer of a run's rows: each row durable as it is written, the
    run's facts stored once (:func:`own_run_facts`)."""
    return RowWriter(run_dir, facts=own_run_facts(run_dir))


def row_values(row: Row | dict[str, Any]) -> list[Any]:
    """A row's values in FIELDS order (keys that are not fields go into ``extra``)."""
    if not isinstance(row, Row):
        row = Row.from_dict(row)
    return list(_FIELD_VALUES(row))


# Row lines held before they are written in one call (RowWriter without sync).
_HELD_LINES = 256


class RowWriter:
    """Appends rows to a run's JSON Lines file, durable after each row.

    With ``sync=False`` (rows imported from a file, which can be imported again, by the
    only writer of the file) rows are buffered and durable at :meth:`close`, and nested
    dicts shared from row to row are encoded once (see :class:`SharedText`).

    With ``facts`` (an imported run, one writer), what rows share is written once to
    facts.jsonl and each line holds a row's own values (see gpulane.runfacts); the
    facts are written and closed with the rows."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        sync: bool = True,
        facts: RunFacts | None = None,
    ) -> None:
        self.sync = sync
        self.facts = facts
        # Imported rows: a run's shared facts are encoded once (see SharedText).
        self._encode = _ENCODE if sync else SharedText(_ENCODE, _JSON_COLUMNS)
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / ROWS_JSONL
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for appends
        self._held: list[str] = []  # row lines not yet written (see write_line)
        if self._fh.tell() > 0 and not _ends_with_newline(self.path):
            # A line cut off by a crash or a full disk: end it, so that it cannot swallow
            # the next row (read_rows skips it).
            try:
                self._fh.write("\n")
                self._fh.flush()
            except OSError:
                self._fh.close()
                raise

    def write(self, row: Row | dict[str, Any]) -> None:
        if self.facts is not None:
            self.write_line(self.facts.line(row_values(row))[1])
            if self.sync:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            return
        self._write_held()  # lines held before it stay before it
        # The fields as they are (the encoder copies nothing; to_dict deep-copies, slowly).
        data = dict(zip(FIELDS, _FIELD_VALUES(row), strict=True)) if isinstance(row, Row) else row
        # One write call per line: concurrent appenders never interleave within a line.
        self._fh.write(self._encode(data) + "\n")
        if self.sync:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def write_line(self, line: dict[str, Any]) -> None:
        """A row's line of its own values (:meth:`RunFacts.line`). Without ``sync`` the
        lines are held and written a block at a time (a write call per line was a tenth
        of a long import's writing); the text is the same."""
        if self.sync:
            self._fh.write(_ENCODE_LINE(line) + "\n")
            return
        held = self._held
        # its C encoder called directly: it keeps no marks (check_circular off), so there
        # is nothing to reset after a failure, as _Encoder does
        held.append(_ENCODE_LINE(line) if _C_LINE is None else "".join(_C_LINE(line, 0)))
        if len(held) >= _HELD_LINES:
            self._write_held()

    def _write_held(self) -> None:
        if self._held:
            held, self._held = self._held, []
            held.append("")  # the last line's end
            self._fh.write("\n".join(held))

    def close(self) -> None:
        if self.facts is not None:
            self.facts.close()
        if not self._fh.closed:
            try:
                self._write_held()
                self._fh.flush()
                if not self.sync:
                    os.fsync(self._fh.fileno())
            finally:
                self._fh.close()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def read_rows(path: str | os.PathLike[str]) -> Iterator[Row]:
    """Rows of a JSON Lines file, or of every rows.jsonl under a directory, as :class:`Row`
    (keys that are not fields in ``extra``, see :func:`row_of`).

    Every complete line is returned, joined with its run's facts (facts.jsonl beside it,
    see gpulane.runfacts). A line that is not a JSON object, or whose facts are missing,
    is skipped, and a warning says how many were, and which (once per file and size in a
    process): a last line cut off by a crash, or lines damaged after the run wrote them.
    """
    return _lines(path, typed=True)


def _row_dicts(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The lines of :func:`read_rows` as they are, for the Parquet copy (whose columns
    are the keys of the lines, those that are not fields too)."""
    return _lines(path, typed=False)


def _lines(path: str | os.PathLike[str], typed: bool) -> Iterator[Any]:
    """Each readable line, joined with its facts: a Row (``typed``) or its dict."""
    p = Path(path)
    files = sorted(p.rglob(ROWS_JSONL)) if p.is_dir() else [p]
    width, new = len(FIELDS), object.__new__
    whole_base: dict[str, Any] | None = None  # the last facts seen to hold every field
    for f in files:
        bad: list[int] = []
        cut = False
        facts = FactsReader(f.parent / FACTS_JSONL)
        with facts, open(f, encoding="utf-8", errors="replace") as fh:
            for number, raw in enumerate(fh, 1):
                line = raw.strip()
                if not line:
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    row = None
                if isinstance(row, dict):
                    if FACTS_KEY not in row:
                        yield row_of(row) if typed else row
                        continue
                    base = facts.get(row[FACTS_KEY]) if type(row[FACTS_KEY]) is int else None
                    if base is not None:
                        row = join(row, base)
                        if not typed:
                            yield row
                            continue
                        # When the facts hold exactly the fields and the line added none,
                        # so does the row: checked once per facts (the check is most of
                        # the time a row takes otherwise, and an import's rows are many).
                        if base is not whole_base and len(base) == width:
                            whole_base = base if base.keys() == _FIELD_SET else whole_base
                        if base is whole_base and len(row) == width:
                            typed_row = new(Row)
                            typed_row.__dict__ = row
                            yield typed_row
                        else:
                            yield row_of(row)
                        continue
                if raw.endswith("\n"):
                    bad.append(number)
                else:
                    cut = True
        if bad or cut:
            _warn_skipped(f, bad, cut)


_WARNED: set[tuple[str, int]] = set()


def _warn_skipped(path: Path, bad: list[int], cut: bool) -> None:
    try:
        key = (str(path.resolve()), path.stat().st_size)
    except OSError:
        key = (str(path), -1)
    if key in _WARNED:
        return
    _WARNED.add(key)
    said = []
    if bad:
        shown = ", ".join(str(n) for n in bad[:5]) + (", ..." if len(bad) > 5 else "")
        said.append(f"{len(bad)} unreadable line{'s' if len(bad) > 1 else ''} ({shown})")
    if cut:
        said.append("its last line, cut off")
    print_warning(f"{path}: skipped {' and '.join(said)}; the other rows are read")


def rows_frame(rows: Iterable[Row]) -> Any:
    """A pandas DataFrame of rows, with every Row field as a column (the one place the
    frame of the rules and reports is made from rows)."""
    import pandas as pd

    # The fields as they are, in FIELDS order (to_dict's deep copy is not needed: the
    # frame is made of rows read for it, and it was most of the time of a large frame).
    frame = pd.DataFrame.from_records([_FIELD_VALUES(r) for r in rows], columns=list(FIELDS))
    return frame


def frame_rows(frame: Any) -> list[Row]:
    """The rows of a rows frame (:func:`rows_frame`, :func:`read_parquet`, the analysis
    layer's normalised frame), as :class:`Row`, for the rules and reports that go row by
    row. Values are the frame's as they are (a normalised number may be NaN or NA); a
    field the frame has no column for is None; a column that is not a field (``run_dir``,
    ``figure``) is kept in ``extra``."""
    names = {str(c): c for c in frame.columns}
    empty = [None] * len(frame)
    columns = [frame[names[n]].tolist() if n in names else empty for n in FIELDS]
    others = [n for n in names if n not in _FIELD_SET]
    other_values = zip(*(frame[names[n]].tolist() for n in others), strict=True)
    out = []
    with _collector_paused():
        for values in zip(*columns, strict=True):
            data = dict(zip(FIELDS, values, strict=True))
            if others:
                own = data["extra"]
                data["extra"] = {
                    **(own if isinstance(own, dict) else {}),
                    **dict(zip(others, next(other_values), strict=True)),
                }
            row = object.__new__(Row)  # the dict holds exactly the fields (see row_of)
            row.__dict__ = data
            out.append(row)
    return out


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a list of rows grows: rows hold no
    cycles, and the collector's passes over the growing list were most of the time a
    large run's rows took to read (22 % more than its dicts, which are half the objects)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_all_rows(path: str | os.PathLike[str]) -> list[Row]:
    """:func:`read_rows` into a list (see :func:`_collector_paused`)."""
    with _collector_paused():
        return list(read_rows(path))


def row_value(row: Row, name: str) -> Any:
    """A field of ``row``, or a frame's column that is not one (kept in ``extra`` by
    :func:`frame_rows`, ``figure`` say); None when it has neither."""
    if name in _FIELD_SET:
        return getattr(row, name)
    extra = row.extra
    return extra.get(name) if isinstance(extra, dict) else None
