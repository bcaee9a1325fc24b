"""The result record: one tidy row per measured point, shared by every backend and run type.

Rows are appended to ``rows.jsonl`` as they are measured (one ``write`` + flush + fsync per
row, so a crash never loses a finished point); ``rows.parquet`` is the tabular copy written
at the end (see DESIGN.md, "Result record").
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROWS_JSONL = "rows.jsonl"
ROWS_PARQUET = "rows.parquet"

KINDS = ("collective", "copy", "tokens")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(label: str | None = None) -> str:
    """A run id that sorts by time and never collides: 20261122-001512-host-3f2a."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    host = (label or socket.gethostname().split(".")[0]).replace("/", "-")
    return f"{stamp}-{host}-{uuid.uuid4().hex[:4]}"


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
    status: str = "ok"
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        unknown = {k: v for k, v in data.items() if k not in names}
        row = cls(**known)
        if unknown:
            row.extra = {**row.extra, **unknown}
        return row


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Row))
_JSON_COLUMNS = ("env", "versions", "extra")


class RowWriter:
    """Appends rows to a run's JSON Lines file, durable after each row (with ``sync=False``,
    written after each row and durable at close: for rows imported from a file, which can
    be imported again)."""

    def __init__(self, run_dir: str | os.PathLike[str], *, sync: bool = True) -> None:
        self.sync = sync
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / ROWS_JSONL
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for appends
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
        # The fields as they are (json.dumps copies nothing; to_dict deep-copies, slowly).
        data = {name: getattr(row, name) for name in FIELDS} if isinstance(row, Row) else row
        # One write call per line: concurrent appenders never interleave within a line.
        self._fh.write(json.dumps(data, default=str) + "\n")
        self._fh.flush()
        if self.sync:
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if not self._fh.closed:
            if not self.sync:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            self._fh.close()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def read_rows(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Rows of a JSON Lines file, or of every rows.jsonl under a directory.

    A last line cut off by a crash is skipped; every complete line is returned.
    """
    p = Path(path)
    files = sorted(p.rglob(ROWS_JSONL)) if p.is_dir() else [p]
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


def rows_frame(rows: Iterable[Row | dict[str, Any]]) -> Any:
    """A pandas DataFrame of rows, with every Row field as a column."""
    import pandas as pd

    records = [r.to_dict() if isinstance(r, Row) else dict(r) for r in rows]
    frame = pd.DataFrame.from_records(records)
    for name in FIELDS:
        if name not in frame.columns:
            frame[name] = None
    return frame


def write_parquet(run_dir: str | os.PathLike[str]) -> Path | None:
    """Write rows.parquet beside rows.jsonl (atomically); None when there are no rows."""
    run_dir = Path(run_dir)
    src = run_dir / ROWS_JSONL
    if not src.exists():
        return None
    rows = list(read_rows(src))
    if not rows:
        return None
    frame = rows_frame(rows)
    # Dict columns vary in keys from row to row; JSON text keeps them queryable and stable.
    for name in _JSON_COLUMNS:
        frame[name] = frame[name].map(lambda v: json.dumps(v, sort_keys=True, default=str))
    out = run_dir / ROWS_PARQUET
    tmp = out.with_suffix(".parquet.tmp")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, out)
    return out


def read_parquet(path: str | os.PathLike[str]) -> Any:
    """A DataFrame from rows.parquet with the dict columns decoded again."""
    import pandas as pd

    frame = pd.read_parquet(path)
    for name in _JSON_COLUMNS:
        if name in frame.columns:
            frame[name] = frame[name].map(lambda v: json.loads(v) if isinstance(v, str) else v)
    return frame
