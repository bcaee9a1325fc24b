"""The result store: every row of every run directory, as one pandas DataFrame.

A *run directory* holds ``rows.jsonl`` (appended while measuring) and, after the run,
``rows.parquet``. A path given to the store may be a run directory, a directory of run
directories (``runs/``, an accept group, a multirun), or a rows file. Parquet is read when
it is at least as new as the JSON Lines beside it (it is the complete tabular copy);
otherwise the JSON Lines are read, so a run that crashed before writing Parquet still
counts.

Every row gets two columns of its own beside the Row fields: ``run_dir`` (where it was
read from) and ``figure`` (a short description of what was measured, used by compare and
the acceptance rules). DuckDB is optional: :meth:`ResultStore.sql` uses it when installed.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gpulane.errors import InputError
from gpulane.parquet_rows import read_parquet
from gpulane.record import FIELDS, ROWS_JSONL, ROWS_PARQUET, Row, frame_rows, read_rows, rows_frame
from gpulane.rundir import RunDir, run_dirs_with_rows
from gpulane.topology.model import Topology
from gpulane.units import format_size, parse_size

TOPOLOGY_FILE = "topology.json"
BASELINES_DIR = "baselines"

# What identifies "the same measurement" in two runs (baseline, compare), per kind.
# The endpoint columns (src, dst, host) are added where a figure is per GPU or pair.
FIGURE_KEYS: dict[str, tuple[str, ...]] = {
    "collective": ("op", "dtype", "redop", "in_place", "graph", "world_size", "size_bytes"),
    # peer_access: P2P on or off; world_size: GPUs copying at once (1 solo, n all at once)
    "copy": ("op", "memory", "bidirectional", "peer_access", "world_size", "size_bytes"),
    "tokens": ("op", "model", "dtype", "tp", "pp", "batch", "input_len", "output_len"),
}
ENDPOINT_KEYS = ("src", "dst")

# The figure of merit per kind, its unit and whether more is better.
METRICS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "collective": (("busbw_gbps", "GB/s", True), ("time_us", "us", False)),
    "copy": (("algbw_gbps", "GB/s", True),),
    "tokens": (("tokens_per_s", "tok/s", True), ("ttft_ms", "ms", False)),
}
METRIC_UNITS = {m: (unit, up) for ms in METRICS.values() for m, unit, up in ms}
METRIC_UNITS.update({"efficiency": ("", True), "expected_gbps": ("GB/s", True)})


def find_run_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """Run directories at or under ``path`` (those holding rows.jsonl or rows.parquet)."""
    p = Path(path)
    if not p.is_dir():
        return []
    found = run_dirs_with_rows(p)
    # Stored baselines are copies of other runs: only read them when asked for directly.
    if p.name != BASELINES_DIR and p.parent.name != BASELINES_DIR:
        found = {d for d in found if BASELINES_DIR not in d.relative_to(p).parts}
    return sorted(found)


def _read_run_dir(run_dir: Path) -> pd.DataFrame:
    run = RunDir.at(run_dir)
    jsonl, parquet = run.rows_path, run.parquet_path
    if parquet.exists() and (
        not jsonl.exists() or parquet.stat().st_mtime >= jsonl.stat().st_mtime
    ):
        try:
            frame = _parquet(parquet)
            frame["run_dir"] = str(run_dir)
            return frame
        except InputError:  # a Parquet file cut short: the JSON Lines are the record
            if not jsonl.exists():
                raise
    frame = rows_frame(read_rows(jsonl))
    frame["run_dir"] = str(run_dir)
    return frame


def _parquet(path: Path) -> pd.DataFrame:
    """A rows.parquet; one InputError naming the file when it is not one (cut, garbage)."""
    try:
        return read_parquet(path)
    except InputError:
        raise
    except Exception as err:  # pyarrow raises ArrowInvalid, OSError, ... for a bad file
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        # pyarrow repeats the path: "Could not open Parquet input source '<path>': <why>. ..."
        why = first.split("': ", 1)[-1].split(". ")[0]
        raise InputError(f"{path}: not a readable rows Parquet file ({why})") from err


def _read_file(path: Path) -> pd.DataFrame:
    frame = _parquet(path) if path.suffix == ".parquet" else rows_frame(read_rows(path))
    frame["run_dir"] = str(path.parent)
    return frame


def load_frame(paths: Iterable[str | os.PathLike[str]]) -> pd.DataFrame:
    """All rows under ``paths``, normalised (see :func:`normalize`)."""
    frames: list[pd.DataFrame] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise InputError(f"{p}: no such run directory or rows file")
        if p.is_dir():
            dirs = find_run_dirs(p)
            if not dirs:
                raise InputError(f"{p}: no {ROWS_JSONL} or {ROWS_PARQUET} under this directory")
            frames.extend(_read_run_dir(d) for d in dirs)
        else:
            frames.append(_read_file(p))
    frames = [f for f in frames if len(f)]
    if not frames:
        return normalize(rows_frame([]).assign(run_dir=pd.Series(dtype=object)))
    return normalize(pd.concat(frames, ignore_index=True))


def frame_from_rows(rows: Iterable[Row], run_dir: str = "") -> pd.DataFrame:
    """A normalised frame from rows (tests, importers)."""
    frame = rows_frame(rows)
    frame["run_dir"] = run_dir
    return normalize(frame)


_NUMERIC = (
    "size_bytes",
    "count",
    "world_size",
    "nodes",
    "time_us",
    "time_us_p50",
    "time_us_p99",
    "algbw_gbps",
    "busbw_gbps",
    "wrong",
    "expected_gbps",
    "efficiency",
    "tokens_per_s",
    "ttft_ms",
    "tp",
    "pp",
    "batch",
    "input_len",
    "output_len",
)


_INTEGER = (
    "size_bytes",
    "count",
    "world_size",
    "nodes",
    "wrong",
    "tp",
    "pp",
    "batch",
    "input_len",
    "output_len",
)


def normalize(frame: pd.DataFrame) -> pd.DataFrame:
    """Every Row field as a column, numbers as floats, copy bandwidth in ``algbw_gbps``,
    and a ``figure`` label per row."""
    frame = frame.copy()
    for name in FIELDS:
        if name not in frame.columns:
            frame[name] = None
    if "run_dir" not in frame.columns:
        frame["run_dir"] = ""
    for name in _NUMERIC:
        frame[name] = pd.to_numeric(frame[name], errors="coerce")
    for name in _INTEGER:
        # Whole numbers print as such; a column with fractions stays float.
        with contextlib.suppress(TypeError, ValueError):
            frame[name] = frame[name].astype("Int64")
    for name in ("env", "versions", "extra"):
        frame[name] = frame[name].map(_as_dict)
    frame["status"] = frame["status"].fillna("ok")
    # Copy rows: bandwidth is algbw (bytes / time); a producer that only set busbw still counts.
    is_copy = frame["kind"] == "copy"
    frame.loc[is_copy, "algbw_gbps"] = frame.loc[is_copy, "algbw_gbps"].fillna(
        frame.loc[is_copy, "busbw_gbps"]
    )
    frame["figure"] = [figure_label(r) for r in frame_rows(frame)] if len(frame) else []
    return frame


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of a frame as plain dicts keyed by column name."""
    return [{str(k): v for k, v in r.items()} for r in frame.to_dict("records")]


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.startswith("{"):
        try:
            out = json.loads(value)
            return out if isinstance(out, dict) else {}
        except json.JSONDecodeError:
            return {}
    return {}


def _present(value: Any) -> bool:
    if value is None:
        return False
    try:
        return not bool(pd.isna(value))
    except (TypeError, ValueError):
        return True


def figure_label(row: Row, endpoints: bool = False) -> str:
    """A short, stable description: ``all_reduce float 1 GiB``, ``h2d pinned 256 MiB``,
    ``decode llama tp2 pp1 b8``. In-place and graph variants are marked."""
    kind = row.kind
    parts = [str(row.op)]
    if kind == "collective":
        if _present(row.dtype):
            parts.append(str(row.dtype))
        if row.size_bytes is not None and _present(row.size_bytes):
            parts.append(format_size(int(row.size_bytes)))
        if row.in_place is True:
            parts.append("in-place")
        if row.graph is True:
            parts.append("graph")
    elif kind == "copy":
        if _present(row.memory):
            parts.append(str(row.memory))
        if row.bidirectional is True:
            parts.append("bidir")
        if row.size_bytes is not None and _present(row.size_bytes):
            parts.append(format_size(int(row.size_bytes)))
        if endpoints and (_present(row.src) or _present(row.dst)):
            parts.append(f"{row.src}->{row.dst}")
    elif kind == "tokens":
        if _present(row.model):
            parts.append(str(row.model))
        for name, prefix in (("tp", "tp"), ("pp", "pp"), ("batch", "b")):
            if _present(getattr(row, name)):
                parts.append(f"{prefix}{int(getattr(row, name))}")
        for name, prefix in (("input_len", "in"), ("output_len", "out")):
            if _present(getattr(row, name)):
                parts.append(f"{prefix}{int(getattr(row, name))}")
    return " ".join(parts)


def key_frame(frame: pd.DataFrame, kind: str, extra: Sequence[str] = ()) -> pd.DataFrame:
    """The figure-key columns of ``frame`` for ``kind`` as comparable text ('-' for missing)."""
    cols = [*FIGURE_KEYS[kind], *extra]
    out = pd.DataFrame(index=frame.index)
    for c in cols:
        out[c] = frame[c].map(_key_text)
    return out


def _key_text(value: Any) -> str:
    if not _present(value):
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# -- filtering ---------------------------------------------------------------------------


@dataclass
class Filters:
    """Row filters as the `results`, `compare` and `report` commands take them."""

    kind: list[str] = field(default_factory=list)
    op: list[str] = field(default_factory=list)
    build: list[str] = field(default_factory=list)
    run: list[str] = field(default_factory=list)
    status: list[str] = field(default_factory=list)
    where: str | None = None
    size_min: str | None = None
    size_max: str | None = None

    def _named(self) -> list[tuple[str, str, list[str]]]:
        """(option, column, patterns) of the value filters given; op aliases that
        ``sweep`` accepts (``allreduce``) read as the op they name."""
        op = [",".join(canonical_op(p) for p in pat.split(",")) for pat in self.op]
        given = (
            ("--kind", "kind", self.kind),
            ("--op", "op", op),
            ("--build", "build", self.build),
            ("--run", "run_id", self.run),
            ("--status", "status", self.status),
        )
        return [(o, c, w) for o, c, w in given if w]

    def apply(self, frame: pd.DataFrame) -> pd.DataFrame:
        out = frame
        for _option, column, wanted in self._named():
            out = out.loc[out[column].map(lambda v, w=wanted: _matches(v, w)).astype(bool)]
        # Size bounds apply to rows that have a size; token rows have none and stay.
        if self.size_min is not None:
            low = parse_size(self.size_min, "--size-min")
            out = out.loc[(out["size_bytes"].isna() | (out["size_bytes"] >= low)).astype(bool)]
        if self.size_max is not None:
            high = parse_size(self.size_max, "--size-max")
            out = out.loc[(out["size_bytes"].isna() | (out["size_bytes"] <= high)).astype(bool)]
        if self.where:
            try:
                out = out.query(self.where, engine="python")
            except Exception as err:
                raise InputError(f"--where {self.where!r}: {err}") from err
        return out

    def why_empty(self, frame: pd.DataFrame, where: str = "") -> str | None:
        """Why no row of ``frame`` passes the filters, naming the filter that emptied it
        and the values present there, with a did-you-mean; None when rows pass."""
        import difflib

        out = frame
        place = f" {where}" if where else ""
        for option, column, wanted in self._named():
            kept = out.loc[out[column].map(lambda v, w=wanted: _matches(v, w)).astype(bool)]
            if len(kept):
                out = kept
                continue
            present = sorted({str(v) for v in out[column] if _present(v)})
            asked = [p for pat in wanted for p in pat.split(",") if p]
            lower = {v.lower(): v for v in present}
            close = [lower[a.lower()] for a in asked if a.lower() in lower]
            for a in asked:
                close += difflib.get_close_matches(a.lower(), list(lower), n=1, cutoff=0.6)
            hint = f"; did you mean {lower.get(close[0], close[0])}?" if close else ""
            others = "" if out is frame else " left by the filters before it"
            listing = ", ".join(present[:8]) + (
                f" (+{len(present) - 8})" if len(present) > 8 else ""
            )
            shown = ",".join(getattr(self, option[2:]))
            return (
                f"{option} {shown}: no row{place}{others} has that {column} "
                f"({column} there: {listing or 'none'}){hint}"
            )
        return None


def canonical_op(name: str) -> str:
    """An op as rows name it: sweep's aliases (``allreduce``, ``bcast``) read as the op."""
    from gpulane.collectives.spec import COLLECTIVE_ALIASES

    key = name.strip().lower().replace("-", "_")
    return COLLECTIVE_ALIASES.get(key, name.strip())


def _matches(value: Any, patterns: Sequence[str]) -> bool:
    """Comma lists and shell wildcards: ``--op all_*``, ``--build x16,riser-*``."""
    if not _present(value):
        return False
    text = str(value)
    return any(fnmatch.fnmatchcase(text, p) for pat in patterns for p in pat.split(","))


class ResultStore:
    """Rows of some run directories; filter with pandas, or SQL through DuckDB if present."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        self.paths = [Path(p) for p in paths]
        self.frame = load_frame(self.paths)

    def select(self, filters: Filters | None = None, **kw: Any) -> pd.DataFrame:
        return (filters or Filters(**kw)).apply(self.frame)

    def sql(self, query: str) -> pd.DataFrame:
        """Run SQL over the rows as table ``rows`` (needs the optional ``duckdb``)."""
        try:
            import duckdb
        except ImportError as err:
            from gpulane.errors import MissingComponent

            raise MissingComponent(
                "--sql needs DuckDB (pip install duckdb); use --where with a pandas query instead"
            ) from err
        rows = self.frame.copy()
        for name in ("env", "versions", "extra"):
            rows[name] = rows[name].map(lambda v: json.dumps(v, sort_keys=True, default=str))
        con = duckdb.connect()
        con.register("rows", rows)
        return con.execute(query).df()


# -- locating runs, builds, topology -------------------------------------------------------


def resolve_targets(
    targets: Sequence[str], results_dir: str | os.PathLike[str] = "runs"
) -> list[tuple[str, pd.DataFrame]]:
    """Each of ``targets`` (a run directory, rows file, run id, or build label) as
    ``(label, rows)``. A run id or build label is looked up under ``results_dir``."""
    out: list[tuple[str, pd.DataFrame]] = []
    store: pd.DataFrame | None = None
    for target in targets:
        p = Path(target)
        if p.exists():
            frame = load_frame([p])
            builds = sorted({str(b) for b in frame["build"].dropna()})
            label = builds[0] if len(builds) == 1 else p.name
            out.append((label, frame))
            continue
        if store is None:
            root = Path(results_dir)
            if not root.is_dir():
                raise InputError(
                    f"{target!r} is not a path, and results_dir {root} does not exist to look "
                    "it up as a run id or build label"
                )
            store = load_frame([root])
        by_run = store[store["run_id"] == target]
        if len(by_run):
            out.append((target, by_run))
            continue
        by_build = store[store["build"] == target]
        if len(by_build):
            out.append((target, by_build))
            continue
        known = sorted({str(b) for b in store["build"].dropna()})
        raise InputError(
            f"{target!r} is not a run directory, rows file, run id or build label under "
            f"{results_dir} (builds there: {', '.join(known) or 'none'})"
        )
    return out


def find_topology(paths: Iterable[str | os.PathLike[str]]) -> Path | None:
    """A topology.json in (or above, up to two levels) the given run paths, if any."""
    for raw in paths:
        p = Path(raw)
        start = p if p.is_dir() else p.parent
        candidates = [start, start.parent, start.parent.parent]
        if p.is_dir():
            candidates += sorted(p.rglob(TOPOLOGY_FILE))
        for c in candidates:
            f = c if c.name == TOPOLOGY_FILE else c / TOPOLOGY_FILE
            if f.is_file():
                return f
    return None


def load_topology(path: str | os.PathLike[str]) -> Topology:
    """A topology JSON file as `gpulane topo --json` writes it (DESIGN.md), as the model."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise InputError(f"topology: {p}: no such file") from err
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        where = (
            f" ({err.msg} at line {err.lineno})" if isinstance(err, json.JSONDecodeError) else ""
        )
        raise InputError(f"topology: {p}: not JSON{where}") from err
    except OSError as err:
        raise InputError(f"topology: {p}: cannot read: {err.strerror or err}") from err
    return Topology.from_json(data, f"topology: {p}")
