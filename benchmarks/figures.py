"""The figures of a benchmarks README and where each comes from: the ```figures blocks.

A README under ``benchmarks/`` states where each of its figures comes from in one or more
fenced blocks of the language ``figures``: a YAML list, one entry per figure::

    - id: roofline-ratio              # unique in the README
      file: h200x2/roofline/*/rows.jsonl   # relative to the README's folder; a glob or a list
      read: rows                       # how to read it (default from the file's name, below)
      where: op == "decode" and status == "ok"   # keeps the records where this is true
      value: one.time_us / 1e3         # the figure, from the records kept
      shown: "5.433"                   # the figure as the README prints it (must appear there);
                                       # its first number is the figure, or the one in {braces}:
                                       # "8 B {3.2}–5.5 µs" (braces are not part of the text)
      tol: 0.001                       # optional: absolute tolerance (default: half a unit
                                       # of the last printed digit); or rtol: 0.01
      line: "| nvlink | TP=2 | 1 |"    # optional: the shown text must be on a README line
                                       # holding this (e.g. the table row)

``value`` may be a list, with ``shown`` a list of as many printed figures (a table row).

and entries that regenerate a committed output and compare it byte for byte::

    - id: advise-table
      run: python benchmarks/advise/predict_vs_measured.py --tokens ...   # from the repo root
      output: h200x2-vs-measured.md    # relative to the README's folder
      status: 1                        # optional: the exit status the command must end with

Readers (``read``): ``rows`` (JSON Lines, default for ``.jsonl``), ``json`` (one document,
or JSON Lines; default for ``.json``), ``nccl-tests`` (an nccl-tests log, as gpulane's
importer reads it), ``sweep-table`` (the table ``gpulane sweep`` prints: one record per
size and placement, with op, size_bytes, in_place, time_us, algbw_gbps, busbw_gbps, wrong), ``table`` (the Markdown pipe tables of a file, default for ``.md``: a column name that
repeats gets its place, ``err``, ``err#2``; ``_table`` numbers the tables, ``_title`` is the
heading above),
``items: outcomes`` takes the records from a list inside the document; ``regex``
(``pattern`` with named groups, one record per match; default where a pattern is given and
for files not named above),
``text`` (one record, ``text``: the file), ``parquet`` (a ``rows.parquet``, default for
``.parquet``, one record per row as gpulane reads it). ``.gz`` files are read through gzip.
A folder packed as ``<folder>.zip`` (``benchmarks/archive.py``) is read through its old
paths: a ``file`` or ``output`` under it names the member, as it did the file.

Expressions are Python over the records: in ``where`` each field is a name (and ``r`` is
the record); in ``value``: ``rows`` (the records kept), ``one`` (the only one; an error
unless exactly one), ``fig`` (figures computed above in the same README, by id), and
``bytes_of("1 MiB")``, ``pick(field=value, ...)`` (the only record kept with those fields), ``mean``, ``median``, ``geomean``, ``num``, ``min``, ``max``, ``sum``, ``len``, ``abs``,
``round``. Records allow ``r.field`` and ``r["field with spaces"]``; numeric strings of a
table or a regex are numbers.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import shlex
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks import archive, forked_run
from gpulane.units import parse_size

ROOT = Path(__file__).resolve().parents[1]
# libyaml's safe loader where PyYAML was built with it: the same documents, a tenth of the
# CPU (tests/benchmarks/test_figures_cache.py holds every README's blocks to the Python one)
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
BLOCK = re.compile(r"^```figures[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
# a sign counts only where it starts a word ("-0.5", "+25 %"; not "0.82-0.87")
NUMBER = re.compile(r"(?:(?<![\w.])[-+−])?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
KEYS = {"id", "file", "read", "where", "value", "shown", "line", "tol", "rtol", "pattern",
        "run", "output", "status", "items", "note"}  # fmt: skip


class FigureError(Exception):
    """A figure that cannot be computed, or a block that is malformed."""


class Record(dict[str, Any]):
    """A record whose fields are also attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no field {name!r} (fields: {', '.join(self)})") from None


@dataclass
class Figure:
    readme: Path
    spec: dict[str, Any]
    value: float | None = None  # the figure, where it is one number
    values: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.spec.get("id"))

    @property
    def ok(self) -> bool:
        return not self.problems


# -- reading --------------------------------------------------------------------------
def _text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    return path.read_text(encoding="utf-8", errors="replace")


def num(value: Any) -> Any:
    """A number from a cell or a group ("1,234", "+4%", "−0.5", "**24**"), else as is."""
    if isinstance(value, str):
        s = value.strip().strip("*`").replace("−", "-").replace(",", "").rstrip("%× ")
        try:
            return int(s) if re.fullmatch(r"[-+]?\d+", s) else float(s)
        except ValueError:
            return value
    return value


def _none_if_nan(value: Any) -> Any:
    """A missing cell of a Parquet frame (NaN) as None, as the JSON Lines have it."""
    return None if isinstance(value, float) and math.isnan(value) else value


def _json_records(text: str, items: str | None) -> list[Record]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    for key in items.split(".") if items else []:
        data = data[key]
    found = data if isinstance(data, list) else [data]
    return [Record(d) if isinstance(d, dict) else Record(value=d) for d in found]


def _table_records(text: str) -> list[Record]:
    out: list[Record] = []
    header: list[str] | None = None
    table = 0
    title = ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            title = s.lstrip("#").strip()
        if not s.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in s.strip("|").split("|")]
        if header is None:
            # a repeated column name gets its place: "err", "err#2" (a table of two halves)
            header, table = [], table + 1
            for c in cells:
                header.append(
                    c if c not in header else f"{c}#{sum(h.split('#')[0] == c for h in header) + 1}"
                )
        elif all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue
        else:
            out.append(
                Record(
                    {
                        "_table": table,
                        "_title": title,
                        **dict(zip(header, map(num, cells), strict=False)),
                    }
                )
            )
    return out


def _sweep_table_records(text: str) -> list[Record]:
    """The table ``gpulane sweep`` prints (nccl-tests' columns under a ``# <op> (...)``
    heading): one record per size and placement, ``n/a`` as None."""
    out: list[Record] = []
    op = None
    for line in text.splitlines():
        head = re.match(r"^# (\w+) \(", line)
        if head:
            op = head.group(1)
            continue
        cells = line.split()
        if op is None or len(cells) != 13 or not cells[0].isdigit():
            continue
        size, count, dtype, redop, root = cells[:5]
        for in_place, (t, alg, bus, wrong) in ((False, cells[5:9]), (True, cells[9:13])):
            fields = {
                "op": op, "size_bytes": int(size), "count": int(count), "dtype": dtype,
                "redop": redop, "root": int(root), "in_place": in_place, "time_us": t,
                "algbw_gbps": alg, "busbw_gbps": bus, "wrong": wrong,
            }  # fmt: skip
            out.append(Record({k: None if v == "n/a" else num(v) for k, v in fields.items()}))
    return out


def _nccl_tests_records(path: Path, name: Path) -> list[Record]:
    from gpulane.collectives.nccl_tests.logs import rows_from_log

    return [Record(r.to_dict()) for r in rows_from_log(_text(path), str(name))]


# (file, a digest of its bytes, how it is read) -> its records as read: several figures
# read the same file (a topic's rows, mutation.json), so it is parsed once while its bytes
# stay the same. The key holds the bytes' digest, not the mtime: a file rewritten with the
# same size within one tick of the file system's clock keeps its mtime.
_READ: dict[tuple[Any, ...], list[Record]] = {}


def read_records(path: Path, spec: dict[str, Any]) -> list[Record]:
    """The records of ``path`` as ``spec`` reads them (fresh copies: a caller may add
    fields, as ``compute`` adds ``_file``)."""
    real = archive.real(path)  # a member of a packed folder is read from its unpacked copy
    try:
        digest = hashlib.blake2b(real.read_bytes(), digest_size=20).hexdigest()
    except OSError:
        return _read_records(path, real, spec)  # the reader's own error names it
    how = tuple((k in spec, str(spec.get(k))) for k in ("read", "pattern", "items"))
    key = (str(path), digest, *how)
    if key not in _READ:
        _READ[key] = _read_records(path, real, spec)
    return [Record(r) for r in _READ[key]]


def _read_records(shown_as: Path, path: Path, spec: dict[str, Any]) -> list[Record]:
    name = shown_as.name.removesuffix(".gz")
    reader = spec.get("read") or (
        "regex" if "pattern" in spec else
        "rows" if name.endswith(".jsonl") else
        "json" if name.endswith(".json") else
        "table" if name.endswith(".md") else
        "parquet" if name.endswith(".parquet") else
        "regex"
    )  # fmt: skip
    if reader == "rows":
        return [Record(json.loads(x)) for x in _text(path).splitlines() if x.strip()]
    if reader == "json":
        return _json_records(_text(path), spec.get("items"))
    if reader == "table":
        return _table_records(_text(path))
    if reader == "nccl-tests":
        return _nccl_tests_records(path, shown_as)
    if reader == "sweep-table":
        return _sweep_table_records(_text(path))
    if reader == "text":
        return [Record(text=_text(path))]
    if reader == "parquet":  # a rows.parquet, read as gpulane reads it (facts joined)
        from gpulane.parquet_rows import read_parquet

        frame = read_parquet(path)
        return [Record({str(k): _none_if_nan(v) for k, v in r.items()})
                for r in frame.to_dict("records")]  # fmt: skip
    if reader == "regex":
        if "pattern" not in spec:
            raise FigureError(f"read: regex needs a pattern (file {path.name})")
        rx = re.compile(str(spec["pattern"]), re.M)
        return [
            Record({k: num(v) for k, v in m.groupdict().items()}) for m in rx.finditer(_text(path))
        ]
    raise FigureError(f"read: unknown reader {reader!r}")


def resolve_files(base: Path, spec: dict[str, Any]) -> list[Path]:
    pats = spec["file"] if isinstance(spec["file"], list) else [spec["file"]]
    files: list[Path] = []
    for pat in pats:
        found = archive.glob(base, str(pat))  # on disk, else inside a packed folder's zip
        if not found:
            raise FigureError(f"file {pat}: nothing there")
        files += found
    return files


# -- computing ------------------------------------------------------------------------
def geomean(values: Iterable[float]) -> float:
    vals = list(values)
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


FUNCTIONS: dict[str, Any] = {
    "mean": statistics.fmean,
    "median": statistics.median,
    "geomean": geomean,
    "num": num,
    "min": min,
    "max": max,
    "sum": sum,
    "len": len,
    "abs": abs,
    "round": round,
    "sorted": sorted,
    "set": set,
    "math": math,
    "bytes_of": lambda text: parse_size(str(text)),  # "1 MiB" -> 1048576
}


def _eval(expr: str, names: dict[str, Any], what: str) -> Any:
    try:
        code = compile(str(expr), f"<{what}>", "eval")
        # names as globals, so that comprehensions in the expression see them too
        return eval(code, {"__builtins__": {}, **names})
    except FigureError:
        raise
    except Exception as err:  # any error in a README's expression is the figure's problem
        raise FigureError(f"{what} {expr!r}: {type(err).__name__}: {err}") from None


class _One:
    """``one``: the only record kept; an error on use unless exactly one was."""

    def __init__(self, rows: list[Record]) -> None:
        self._rows = rows

    def _get(self) -> Record:
        if len(self._rows) != 1:
            raise FigureError(f"`one` needs exactly one record, the filter kept {len(self._rows)}")
        return self._rows[0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def __getitem__(self, name: str) -> Any:
        return self._get()[name]


def compute(fig: Figure, done: dict[str, float]) -> None:
    spec, base = fig.spec, fig.readme.parent
    fig.files = resolve_files(base, spec)
    rows: list[Record] = []
    for path in fig.files:
        for rec in read_records(path, spec):
            rec.setdefault("_file", str(path.relative_to(base)))
            rows.append(rec)
    if spec.get("where"):
        rows = [r for r in rows if _eval(spec["where"], {**FUNCTIONS, **r, "r": r}, "where")]

    def pick(**fields: Any) -> Record:
        found = [r for r in rows if all(r.get(k) == v for k, v in fields.items())]
        return _One(found)._get()

    names = {**FUNCTIONS, "rows": rows, "one": _One(rows), "fig": done, "pick": pick}
    got = _eval(spec["value"], names, "value")
    values = [num(v) for v in got] if isinstance(got, (list, tuple)) else [num(got)]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise FigureError(f"value is {v!r}, not a number")
    fig.values = [float(v) for v in values]
    fig.value = fig.values[0] if len(fig.values) == 1 else None


def shown_number(shown: str) -> tuple[float, float]:
    """The number in ``shown`` and half a unit of its last digit (``16.06e9``: 0.005e9)."""
    marked = re.search(r"\{([^}]*)\}", shown)
    m = NUMBER.search(marked.group(1) if marked else shown)
    if not m:
        raise FigureError(f"shown {shown!r} holds no number")
    text = m.group(0).replace("−", "-").replace(",", "")
    mantissa, _, exp = text.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return float(text), 0.5 * 10 ** (int(exp or 0) - decimals)


def compare(fig: Figure, prose: str) -> None:
    spec = fig.spec
    shown = spec["shown"] if isinstance(spec["shown"], list) else [spec["shown"]]
    if len(shown) != len(fig.values):
        raise FigureError(f"{len(fig.values)} values computed, {len(shown)} shown")
    # where a shown text must appear: the line named, else anywhere (line breaks and runs
    # of spaces count as one space, so that wrapping a paragraph changes nothing)
    if "line" in spec:
        places = [_squeeze(ln) for ln in prose.splitlines() if str(spec["line"]) in ln]
        if not places:
            fig.problems.append(f"no README line holds {spec['line']!r}")
    else:
        places = [_squeeze(prose)]
    for text, got in zip(map(str, shown), fig.values, strict=True):
        literal = _squeeze(text.replace("{", "").replace("}", ""))
        if not any(literal in place for place in places):
            where = f"on the line {spec['line']!r}" if "line" in spec else "in the README's text"
            fig.problems.append(f"shown {text!r} does not appear {where}")
        _compare_one(fig, text, got)


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _compare_one(fig: Figure, shown: str, got: float) -> None:
    spec = fig.spec
    want, half_digit = shown_number(shown)
    if "rtol" in spec:
        ok = abs(got - want) <= float(spec["rtol"]) * abs(want)
        bound = f"rtol {spec['rtol']}"
    else:
        tol = float(spec.get("tol", half_digit))
        ok = abs(got - want) <= tol * (1 + 1e-9) + 1e-12
        bound = f"tol {tol:g}"
    if not ok:
        fig.problems.append(f"computed {got:.6g}, the README shows {shown} ({bound})")


def regenerate(fig: Figure) -> None:
    spec, base = fig.spec, fig.readme.parent
    out = base / str(spec["output"])
    fig.files = [out]
    if not archive.real(out).exists():
        raise FigureError(f"output {spec['output']}: not there")
    committed = _text(archive.real(out))
    argv = shlex.split(str(spec["run"]))
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    proc = forked_run.run(argv, ROOT)
    if proc.returncode != int(spec.get("status", 0)):
        raise FigureError(f"run exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    if proc.stdout != committed:
        old, new = committed.splitlines(), proc.stdout.splitlines()
        diff = next(
            (f"line {i + 1}: committed {a!r}, now {b!r}" for i, (a, b) in enumerate(zip(old, new, strict=False))
             if a != b),
            f"{len(old)} lines committed, {len(new)} now",
        )  # fmt: skip
        raise FigureError(f"regenerated {spec['output']} differs: {diff}")


# -- a README -------------------------------------------------------------------------
def blocks(text: str) -> list[str]:
    return [m.group(1) for m in BLOCK.finditer(text)]


def prose_of(text: str) -> str:
    """The README without its figures blocks: where a shown figure must appear."""
    return BLOCK.sub("", text)


def figures_of(readme: Path) -> list[Figure]:
    text = readme.read_text(encoding="utf-8")
    figs: list[Figure] = []
    for block in blocks(text):
        try:
            entries = yaml.load(block, Loader=SAFE_LOADER) or []
        except yaml.YAMLError as err:
            raise FigureError(f"{readme}: a figures block is not YAML: {err}") from None
        if not isinstance(entries, list):
            raise FigureError(f"{readme}: a figures block must be a YAML list")
        for entry in entries:
            if not isinstance(entry, dict) or "id" not in entry:
                raise FigureError(f"{readme}: every figure needs an id: {entry!r}")
            figs.append(Figure(readme, entry))
    return figs


def check_readme(readme: Path) -> list[Figure]:
    """Every figure of ``readme``, computed and compared (problems in ``Figure.problems``)."""
    text = readme.read_text(encoding="utf-8")
    prose = prose_of(text)
    figs = figures_of(readme)
    done: dict[str, float] = {}
    seen: set[str] = set()
    for fig in figs:
        spec = fig.spec
        if fig.id in seen:
            fig.problems.append("id used twice")
        seen.add(fig.id)
        unknown = set(spec) - KEYS
        if unknown:
            fig.problems.append(f"unknown keys {', '.join(sorted(unknown))}")
            continue
        try:
            if "run" in spec:
                regenerate(fig)
                continue
            missing = [k for k in ("file", "value", "shown") if k not in spec]
            if missing:
                raise FigureError(f"missing {', '.join(missing)}")
            compute(fig, done)
            compare(fig, prose)
            if fig.value is not None:
                done[fig.id] = fig.value
        except FigureError as err:
            fig.problems.append(str(err))
    return figs
