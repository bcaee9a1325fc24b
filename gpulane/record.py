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

from gpulane.errors import print_warning

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
        # What dataclasses.asdict gives, without its generic recursion: that was most of
        # the time of printing or writing a large import's rows.
        return {name: _copied(getattr(self, name)) for name in FIELDS}

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


_NESTED = (dict, list, tuple)


def _copied(value: Any) -> Any:
    """A copy of a field's JSON-like value (dicts and lists copied all the way down)."""
    if isinstance(value, dict):
        return {k: _copied(v) if isinstance(v, _NESTED) else v for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) if isinstance(v, _NESTED) else v for v in value)
    return value


_JSON_COLUMNS = ("env", "versions", "extra")


class RowWriter:
    """Appends rows to a run's JSON Lines file, durable after each row.

    ``sync=False`` (rows imported from a file that stays on disk) makes the file durable
    once, at close: an fsync per row would make a large import crawl."""

    def __init__(self, run_dir: str | os.PathLike[str], sync: bool = True) -> None:
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
        data = row.to_dict() if isinstance(row, Row) else row
        # One write call per line: concurrent appenders never interleave within a line.
        self._fh.write(json.dumps(data, default=str) + "\n")
        if self.sync:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if not self._fh.closed:
            try:
                if not self.sync:
                    self._fh.flush()
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


def read_rows(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Rows of a JSON Lines file, or of every rows.jsonl under a directory.

    Every complete line is returned. A line that is not a JSON object is skipped, and a
    warning says how many were, and which (once per file and size in a process): a last
    line cut off by a crash, or lines damaged after the run wrote them.
    """
    p = Path(path)
    files = sorted(p.rglob(ROWS_JSONL)) if p.is_dir() else [p]
    for f in files:
        bad: list[int] = []
        cut = False
        with open(f, encoding="utf-8", errors="replace") as fh:
            for number, raw in enumerate(fh, 1):
                line = raw.strip()
                if not line:
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    row = None
                if isinstance(row, dict):
                    yield row
                elif raw.endswith("\n"):
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


def rows_frame(rows: Iterable[Row | dict[str, Any]]) -> Any:
    """A pandas DataFrame of rows, with every Row field as a column."""
    import pandas as pd

    records = [r.to_dict() if isinstance(r, Row) else dict(r) for r in rows]
    frame = pd.DataFrame.from_records(records)
    for name in FIELDS:
        if name not in frame.columns:
            frame[name] = None
    return frame


PARQUET_BATCH = 20_000  # rows per Parquet row group: memory is one batch, whatever the file
_ARROW = {"int": "int64", "float": "float64", "bool": "bool", "str": "string", "null": "null"}
_FITS = {"int": {"int"}, "float": {"int", "float"}, "bool": {"bool"}, "str": {"str"}}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return "json"


def _annotated() -> dict[str, str]:
    """Row field -> int, float, bool or str, from its annotation (``int | None`` -> int)."""
    out = {}
    for f in dataclasses.fields(Row):
        base = str(f.type).split("|")[0].strip()
        if base in _FITS:
            out[f.name] = base
    return out


def _column_kind(name: str, seen: set[str], annotated: dict[str, str]) -> str:
    values = seen - {"null"}
    if name in _JSON_COLUMNS or "json" in values:
        return "json"
    if not values:
        return "null"  # as pandas wrote it: read back as None, not NaN
    want = annotated.get(name)
    if want is not None and values <= _FITS[want]:
        return want
    if values and values <= {"int"}:
        return "int"
    if values and values <= {"int", "float"}:
        return "float"
    if values == {"bool"}:
        return "bool"
    return "str"


def _cell(value: Any, kind: str) -> Any:
    if kind == "json":
        return json.dumps(value, sort_keys=True, default=str)
    if value is None:
        return None
    if kind == "float":
        return float(value)
    if kind == "str" and not isinstance(value, str):
        return json.dumps(value, default=str) if isinstance(value, (dict, list)) else str(value)
    return value


def write_parquet(run_dir: str | os.PathLike[str]) -> Path | None:
    """Write rows.parquet beside rows.jsonl (atomically); None when there are no rows.

    Rows are read twice, a batch at a time: first for the columns and their types (a Row
    field keeps its annotated type; other keys get the type of their values), then to
    write :data:`PARQUET_BATCH` rows per row group. The dict columns (env, versions,
    extra) vary in keys from row to row: JSON text keeps them queryable and stable.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    src = run_dir / ROWS_JSONL
    if not src.exists():
        return None
    seen: dict[str, set[str]] = {name: set() for name in FIELDS}
    count = 0
    for row in read_rows(src):
        count += 1
        for key, value in row.items():
            seen.setdefault(key, set()).add(_kind(value))
    if not count:
        return None
    annotated = _annotated()
    kinds = {name: _column_kind(name, found, annotated) for name, found in seen.items()}
    schema = pa.schema(
        [
            (name, pa.string() if k == "json" else pa.type_for_alias(_ARROW[k]))
            for name, k in kinds.items()
        ]
    )
    out = run_dir / ROWS_PARQUET
    tmp = out.with_suffix(".parquet.tmp")

    def table(batch: list[dict[str, Any]]) -> Any:
        return pa.table(
            {name: [_cell(r.get(name), k) for r in batch] for name, k in kinds.items()},
            schema=schema,
        )

    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            batch: list[dict[str, Any]] = []
            for row in read_rows(src):
                batch.append(row)
                if len(batch) >= PARQUET_BATCH:
                    writer.write_table(table(batch))
                    batch = []
            if batch:
                writer.write_table(table(batch))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
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


# -- env: the variables that shape a result, kept on every row ----------------------------
ENV_PREFIXES = (
    "NCCL_",
    "TORCH_NCCL",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "GLOO_",
    "OMPI_MCA",
    "UCX_",
)


# Set by installers, launchers and gpulane's own scripts; they do not shape a result.
ENV_IGNORED = {"NCCL_TESTS_HOME", "NCCL_VERSION", "NCCL_HOME"}
# mpirun's own bookkeeping (OMPI_MCA_mpi_oversubscribe, which does shape timings, stays).
ENV_IGNORED_PREFIXES = (
    "OMPI_MCA_orte_",
    "OMPI_MCA_ess",
    "OMPI_MCA_pmix",
    "OMPI_MCA_initial_wdir",
    "OMPI_MCA_shmem_RUNTIME_QUERY_hint",
)


def shaping_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables that shape a result (NCCL_*, ...), for the rows."""
    env = dict(os.environ) if env is None else env
    return {
        k: v
        for k, v in sorted(env.items())
        if k.startswith(ENV_PREFIXES)
        and k not in ENV_IGNORED
        and not k.startswith(ENV_IGNORED_PREFIXES)
    }
