"""`gpulane parse vllm FILE...`: vLLM benchmark results as gpulane ``tokens`` rows.

Reads what vLLM writes and prints:

- ``vllm bench latency --output-json`` (``avg_latency``, ``latencies``, ``percentiles``)
  and its printout (``Avg latency: ... seconds``, ``50% percentile latency: ...``);
- ``vllm bench throughput --output-json`` (``requests_per_second``, ``tokens_per_second``)
  and its printout (``Throughput: 7.15 requests/s, 4656.00 total tokens/s, ...``);
- ``benchmark_serving`` / ``vllm bench serve`` result files (``--save-result`` JSON) and
  the printed ``Serving Benchmark Result`` block (TTFT, TPOT, ITL).

Printouts are read a line at a time and each result's row is given out when its last
line arrives. A result cut short (the file ends inside a line, before the serving block's
closing ``====`` line, before the 99% percentile line, or before the token totals that
follow a ``Throughput:`` line) gets an error row naming the line and what is missing;
numbers on complete lines are kept, a number on a cut line never is. A JSON result is
small, so it is read whole, up to :data:`JSON_LIMIT` bytes (a clear error above that).

JSON holds no Infinity or NaN: vLLM's ``request_rate: inf`` (no rate limit) becomes null
with a note in ``extra.notes``. A vLLM log that ends in a Python exception (the engine
refused to start) is not a result: a ParseError quotes the exception and its line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.errors import InputError, ParseError
from gpulane.record import Row, new_run_id
from gpulane.textio import iter_text_lines_ended, split_text_lines

WHAT = "vLLM bench latency/throughput/serve results (--output-json JSON or the printout)"
OPTIONS: dict[str, str] = {
    "model": "model of the rows, where the file does not name it",
    "tp": "tensor-parallel size of the run",
    "pp": "pipeline-parallel size of the run",
    "batch": "batch size (bench latency: gives tokens/s with --output-len)",
    "input-len": "prompt tokens per request",
    "output-len": "output tokens per request",
}
JSON_LIMIT = 64 << 20  # characters; vLLM's result JSON (with per-request lists) stays far below

Line = tuple[int, str, bool]


@dataclass
class Meta:
    """What a result file may not say about itself, from the command line."""

    build: str | None = None
    run_id: str | None = None
    model: str | None = None
    tp: int | None = None
    pp: int | None = None
    batch: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_EXC_RE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception)):\s*(.*)$")
_NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_SERVING_KEYS = {
    "Successful requests": "completed",
    "Benchmark duration (s)": "duration",
    "Total input tokens": "total_input_tokens",
    "Total generated tokens": "total_output_tokens",
    "Request throughput (req/s)": "request_throughput",
    "Request goodput (req/s)": "request_goodput",
    "Output token throughput (tok/s)": "output_throughput",
    "Total Token throughput (tok/s)": "total_token_throughput",
    "Peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "Peak concurrent requests": "max_concurrent_requests",
    "Maximum request concurrency": "max_concurrency",
    "Traffic request rate": "request_rate",
}
_METRIC_RE = re.compile(
    r"^(Mean|Median|P\d+(?:\.\d+)?|Std)\s+(TTFT|TPOT|ITL|E2EL)\s+\(ms\):\s*" + _NUM + r"\s*$"
)
_THROUGHPUT_RE = re.compile(
    # vLLM of 2023-2024 printed "Throughput: 5.99 requests/s" (benchmark_serving) and
    # "Throughput: 81.74 requests/s, 20926.37 tokens/s" (benchmark_throughput, prompt and
    # output tokens); later ones "..., N total tokens/s, N output tokens/s".
    r"Throughput:\s*" + _NUM + r"\s*requests/s"
    r"(?:,\s*" + _NUM + r"\s*(?:total )?tokens/s"
    # to the line's end: a line cut after "total tokens/s, 10" is no whole result
    r"(?:,\s*" + _NUM + r"\s*output tokens/s)?)?\s*$"
)
_TOTAL_RE = re.compile(r"^Total num (prompt|output) tokens:\s*(\d+)\s*$")
_LATENCY_RE = re.compile(r"^Avg latency:\s*" + _NUM + r"\s*seconds")
_PCT_RE = re.compile(r"^(\d+)% percentile latency:\s*" + _NUM + r"\s*seconds")
_PERCENTILES = ("10", "25", "50", "75", "90", "99")  # what bench latency prints
_NOTES = {
    "request_rate": "request_rate was inf in the file (vLLM's 'no rate limit': every "
    "request sent at once); stored as null"
}


def _num(text: str) -> float | int | None:
    value = float(text)
    if not math.isfinite(value):
        return value  # made null, with a note, by _finite
    integral = value.is_integer() and "." not in text and "e" not in text.lower()
    return int(value) if integral else value


def _finite(row: Row) -> Row:
    """Null for every Infinity or NaN in the row, with a note saying what was there."""
    notes: list[str] = []

    def clean(value: Any, name: str) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            notes.append(_NOTES.get(name, f"{name} was {value} in the file; stored as null"))
            return None
        if isinstance(value, dict):
            return {k: clean(v, f"{name}.{k}" if name else str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v, f"{name}[{i}]") for i, v in enumerate(value)]
        return value

    for f in dataclasses.fields(row):
        if f.name != "extra":
            setattr(row, f.name, clean(getattr(row, f.name), f.name))
    row.extra = clean(row.extra, "")
    if notes:
        row.extra["notes"] = [*row.extra.get("notes", []), *notes]
    return row


def _base(meta: Meta, source: str, op: str) -> dict[str, Any]:
    return {
        "run_id": meta.run_id or new_run_id(meta.build or "vllm"),
        "kind": "tokens",
        "backend": "vllm",
        "op": op,
        "build": meta.build or "vllm",
        "model": meta.model,
        "tp": meta.tp,
        "pp": meta.pp,
        "batch": meta.batch,
        "input_len": meta.input_len,
        "output_len": meta.output_len,
        "source": source,
    }


def _scalar(x: Any) -> bool:
    return isinstance(x, (int, float, str, bool)) or x is None


def _serving_row(v: dict[str, Any], source: str, meta: Meta) -> Row:
    base = _base(meta, source, "serving")
    base["model"] = base["model"] or v.get("model_id")
    if base["batch"] is None and isinstance(v.get("max_concurrency"), int):
        base["batch"] = v["max_concurrency"]

    def us(key: str) -> float | None:
        return v[key] * 1e3 if isinstance(v.get(key), (int, float)) else None

    return Row(
        **base,
        iters=v.get("completed"),
        tokens_per_s=v.get("output_throughput"),
        ttft_ms=v.get("mean_ttft_ms"),
        itl_ms_p50=v.get("median_itl_ms"),
        itl_ms_p99=v.get("p99_itl_ms"),
        time_us=us("mean_tpot_ms"),
        time_us_p50=us("median_tpot_ms"),
        time_us_p99=us("p99_tpot_ms"),
        extra={**meta.extra, **{k: x for k, x in v.items() if _scalar(x)}},
    )


def _throughput_row(v: dict[str, Any], source: str, meta: Meta) -> Row:
    tokens = v.get("output_tokens_per_second")
    if tokens is None and v.get("elapsed_time") and meta.output_len and v.get("num_requests"):
        tokens = v["num_requests"] * meta.output_len / v["elapsed_time"]
    extra = {**meta.extra, **{k: x for k, x in v.items() if _scalar(x)}}
    if tokens is None and v.get("tokens_per_second") is not None:
        extra["note"] = "tokens_per_s counts prompt and output tokens (vLLM's total)"
        tokens = v.get("tokens_per_second")
    return Row(**_base(meta, source, "throughput"), tokens_per_s=tokens, extra=extra)


def _seconds(x: Any, what: str, source: str) -> float:
    """A number of seconds from the file, or ParseError naming what is wrong (a file
    cut or damaged inside the list leaves strings, nulls or halves of numbers there)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ParseError(f"latency result: {what} is {x!r}, not a number of seconds", source)
    return float(x)


def _latency_row(v: dict[str, Any], source: str, meta: Meta) -> Row:
    avg = v.get("avg_latency")
    if not isinstance(avg, (int, float)) or not math.isfinite(avg) or avg <= 0:
        raise ParseError("latency result without a positive number in 'avg_latency'", source)
    raw_pct = v.get("percentiles") or {}
    raw_lat = v.get("latencies") or []
    if not isinstance(raw_pct, dict) or not isinstance(raw_lat, list):
        raise ParseError(
            "latency result: 'percentiles' is no object or 'latencies' no list", source
        )
    pct = {str(k): _seconds(x, f"percentile {k}", source) for k, x in raw_pct.items()}
    lat = [_seconds(x, "a latency", source) for x in raw_lat]
    extra: dict[str, Any] = {**meta.extra, "avg_latency_s": avg, "percentiles_s": pct}
    if "line" in v:
        extra["line"] = v["line"]
    if lat:
        extra["latencies_s"] = lat
    tokens = meta.batch * meta.output_len / avg if meta.batch and meta.output_len else None
    return Row(
        **_base(meta, source, "latency"),
        iters=len(lat) or None,
        time_us=avg * 1e6,
        time_us_p50=pct["50"] * 1e6 if "50" in pct else None,
        time_us_p99=pct["99"] * 1e6 if "99" in pct else None,
        tokens_per_s=tokens,
        extra=extra,
    )


def _from_json(d: dict[str, Any], source: str, meta: Meta) -> Row:
    if "avg_latency" in d:
        return _latency_row(d, source, meta)
    if "requests_per_second" in d or "tokens_per_second" in d:
        return _throughput_row(d, source, meta)
    if "output_throughput" in d:
        # benchmark_serving's per-request lists (ttfts, itls, texts) are left out of the row
        return _serving_row(d, source, meta)
    raise ParseError(
        "JSON without avg_latency (bench latency), tokens_per_second (bench throughput) or "
        "output_throughput (benchmark_serving)",
        source,
    )


def _json_rows(first: Line, rest: Iterator[Line], source: str, meta: Meta) -> Iterator[Row]:
    """A whole JSON result (bounded: see JSON_LIMIT)."""
    parts = [first[1]]
    size = len(first[1])
    for _, text, _ in rest:
        size += len(text) + 1
        if size > JSON_LIMIT:
            raise ParseError(
                f"more than {JSON_LIMIT >> 20} MiB of JSON: too large for a vLLM benchmark "
                "result (gpulane reads those whole)",
                source,
            )
        parts.append(text)
    try:
        data = json.loads("\n".join(parts))
    except json.JSONDecodeError as err:
        hint = "; the file is cut off" if err.pos >= size - 1 else ""
        raise ParseError(
            f"not valid JSON ({err.msg}){hint}", source, first[0] + err.lineno - 1
        ) from None
    for item in data if isinstance(data, list) else [data]:
        if not isinstance(item, dict):
            raise ParseError("expected a JSON object of vLLM results", source, first[0])
        row = _from_json(item, source, meta)
        row.extra.setdefault("line", first[0])
        yield _finite(row)


class _Text:
    """State of a printout read line by line: the result in progress and what it lacks."""

    def __init__(self, source: str, meta: Meta) -> None:
        self.source, self.meta = source, meta
        self.pre: dict[str, Any] = {}  # serving settings printed before the block
        self.serving: dict[str, Any] | None = None
        self.throughput: dict[str, Any] | None = None
        self.latency: dict[str, Any] | None = None
        self.start = 0  # line of the result in progress
        self.rows = 0

    def error(self, line: int, message: str, op: str) -> Row:
        row = Row(**_base(self.meta, self.source, op), status="error")
        row.error = f"{self.source}:{line}: {message}"
        row.extra = {"line": line, "event": "cut_off"}
        return row

    def finish(self, line: int, why: str | None) -> Iterator[Row]:
        """The result in progress; with ``why`` (it was cut), what it lacks as an error row."""
        if self.serving is not None:
            v, self.serving = self.serving, None
            if why is not None:
                if "output_throughput" in v:
                    yield self._row(_serving_row(v, self.source, self.meta))
                yield self.error(line, f"the Serving Benchmark Result block (line {self.start}) "
                                 f"{why} before its closing '====' line", "serving")  # fmt: skip
            elif "output_throughput" not in v:
                raise ParseError(
                    "serving result without 'Output token throughput'", self.source, line
                )
            else:
                yield self._row(_serving_row(v, self.source, self.meta))
        if self.throughput is not None:
            v, self.throughput = self.throughput, None
            yield self._row(_throughput_row(v, self.source, self.meta))
            missing = [k for k in ("prompt", "output") if f"total_num_{k}_tokens" not in v]
            if "output_tokens_per_second" in v and missing:
                names = " and ".join(f"'Total num {k} tokens'" for k in missing)
                yield self.error(line, f"the Throughput result (line {self.start}) "
                                 f"{why or 'ends'} before its {names} line", "throughput")  # fmt: skip
        if self.latency is not None:
            v, self.latency = self.latency, None
            yield self._row(_latency_row(v, self.source, self.meta))
            missing = [p for p in _PERCENTILES if p not in v["percentiles"]]
            if missing:
                yield self.error(line, f"the latency result (line {self.start}) {why or 'ends'} "
                                 f"before its {', '.join(p + '%' for p in missing)} percentile "
                                 "lines", "latency")  # fmt: skip

    def _row(self, row: Row) -> Row:
        self.rows += 1
        row.extra.setdefault("line", self.start)
        return _finite(row)

    def line(self, number: int, line: str) -> Iterator[Row]:
        """One complete line."""
        if "Serving Benchmark Result" in line:
            yield from self.finish(number, "is followed by another result")
            self.serving, self.start = dict(self.pre), number
            return
        if self.serving is not None:
            if re.fullmatch(r"=+", line):
                yield from self.finish(number, None)
                self.pre = {}
                return
            if line.startswith("-") or not line:
                return
            if m := _METRIC_RE.match(line):
                self.serving[f"{m.group(1).lower()}_{m.group(2).lower()}_ms"] = float(m.group(3))
                return
            if ":" not in line:
                raise ParseError(
                    f"unexpected line in the serving result: {line!r}", self.source, number
                )
        if ":" in line and not line.startswith(("Throughput:", "Total num", "Avg latency")):
            name, _, value = line.rpartition(":")
            key = _SERVING_KEYS.get(name.strip())
            if key is not None:
                target = self.serving if self.serving is not None else self.pre
                value = value.strip()
                try:
                    target[key] = _num(value)
                except ValueError:
                    if value != "None":  # every one of these is a number (or None)
                        raise ParseError(
                            f"{name.strip()}: {value!r} is not a number (a damaged or cut line)",
                            self.source,
                            number,
                        ) from None
                    target[key] = None
                return
        if m := _THROUGHPUT_RE.search(line):
            yield from self.finish(number, "is followed by another result")
            self.start = number
            self.throughput = {"requests_per_second": float(m.group(1))}
            if m.group(2):
                self.throughput["tokens_per_second"] = float(m.group(2))
            if m.group(3):
                self.throughput["output_tokens_per_second"] = float(m.group(3))
        elif (m := _TOTAL_RE.match(line)) and self.throughput is not None:
            self.throughput[f"total_num_{m.group(1)}_tokens"] = int(m.group(2))
        elif m := _LATENCY_RE.match(line):
            yield from self.finish(number, "is followed by another result")
            self.start = number
            self.latency = {"avg_latency": float(m.group(1)), "percentiles": {}, "line": number}
        elif (m := _PCT_RE.match(line)) and self.latency is not None:
            self.latency["percentiles"][m.group(1)] = float(m.group(2))
            if m.group(1) == _PERCENTILES[-1]:
                yield from self.finish(number, None)


def rows_from_lines(lines: Iterable[Line], source: str, meta: Meta | None = None) -> Iterator[Row]:
    """Rows of one vLLM result file or printout; ParseError when it is not one."""
    meta = meta or Meta()
    if meta.run_id is None:  # one run id for every row of the file
        meta = dataclasses.replace(meta, run_id=new_run_id(meta.build or "vllm"))
    it = iter(lines)
    st = _Text(source, meta)
    traceback = False
    exception: tuple[int, str] | None = None  # the last exception line, if any
    last = (0, "", True)
    for item in it:
        number, raw, ended = item
        line = raw.strip()
        if not line:
            continue
        if st.rows == 0 and st.serving is None and line.startswith(("{", "[")) and not st.pre:
            yield from _json_rows(item, it, source, meta)
            return
        last = item
        if line.startswith("Traceback (most recent call last)"):
            traceback = True
        if m := _EXC_RE.match(line):
            exception = (number, f"{m.group(1)}: {m.group(2)}")
        if not (ended or raw[-1:].isspace()):
            break  # the file ends inside this line: its numbers are not trusted
        yield from st.line(number, line)
    number, raw, ended = last
    if exception and (traceback or exception[0] == number):
        if st.rows == 0:
            raise ParseError(
                f"a vLLM log that ends in an error, not a benchmark result: {exception[1]}",
                source,
                exception[0],
            )
        yield st.error(exception[0], f"the log ends in an error: {exception[1]}", "unknown")
        return
    cut = not (ended or raw[-1:].isspace())
    why = f"is cut off at line {number} (the file ends inside {raw.strip()[:60]!r})" if cut else (
        f"ends at line {number}"
    )  # fmt: skip
    pending = st.serving is not None or st.throughput is not None or st.latency is not None
    if pending:
        yield from st.finish(number, why)
    elif cut:
        yield st.error(
            number, f"the file ends inside line {number} ({raw.strip()[:60]!r}): cut off", "unknown"
        )
    elif st.rows == 0:
        raise ParseError(
            "no vLLM benchmark result found (expected a 'Serving Benchmark Result' block, a "
            "'Throughput:' line, an 'Avg latency:' line or --output-json JSON)",
            source,
        )


def parse_vllm(text: str, source: str = "<text>", meta: Meta | None = None) -> list[Row]:
    """Rows from one vLLM result file or printout already in memory."""
    if not text.strip():
        raise ParseError("empty file: no vLLM benchmark result", source)
    return list(rows_from_lines(split_text_lines(text), source, meta))


def read_vllm(path: str | Path, meta: Meta | None = None) -> Iterator[Row]:
    """Rows of a vLLM result file, read through gpulane.textio (any encoding it reads)."""
    return rows_from_lines(iter_text_lines_ended(path), str(path), meta)


def _whole(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise InputError(f"--{name}: expected a whole number, got {value!r}") from None
    if number <= 0:
        raise InputError(f"--{name}: expected a positive number, got {value}")
    return number


def meta_from_options(run_id: str | None, build: str | None, **options: str | None) -> Meta:
    """The importer's options (strings from the command line) as a Meta; InputError for bad ones."""
    return Meta(
        build=build,
        run_id=run_id,
        model=options.get("model"),
        tp=_whole("tp", options.get("tp")),
        pp=_whole("pp", options.get("pp")),
        batch=_whole("batch", options.get("batch")),
        input_len=_whole("input-len", options.get("input_len")),
        output_len=_whole("output-len", options.get("output_len")),
    )


def stream_rows(
    path: str, *, run_id: str | None, build: str | None, **options: str | None
) -> Iterator[Row]:
    """The importer contract (gpulane.session.imports): rows of one file, as they are read."""
    return read_vllm(path, meta_from_options(run_id, build, **options))


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def render(rows: Iterable[Row], console: Any) -> None:
    """One line per result: what it measured and its token rate and latencies."""
    head = f"{'source':<28} {'op':<10} {'model':<24} {'tp':>3} {'tokens/s':>10} {'TTFT ms':>10} {'ITL p50':>9} {'ITL p99':>9}"
    console.print(head, markup=False, highlight=False, style="bold")
    for r in rows:
        if r.status != "ok":
            console.print(f"error: {r.error}", markup=False, highlight=False, style="red")
            continue
        console.print(
            f"{Path(r.source or '').name[:28]:<28} {r.op:<10} {str(r.model or '-')[:24]:<24} "
            f"{r.tp or '-'!s:>3} {_f(r.tokens_per_s):>10} {_f(r.ttft_ms):>10} "
            f"{_f(r.itl_ms_p50):>9} {_f(r.itl_ms_p99):>9}",
            markup=False,
            highlight=False,
        )
