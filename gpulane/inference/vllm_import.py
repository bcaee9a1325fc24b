"""`gpulane parse vllm FILE...`: vLLM benchmark results as gpulane ``tokens`` rows.

Reads what vLLM writes and prints:

- ``vllm bench latency --output-json`` (``avg_latency``, ``latencies``, ``percentiles``)
  and its printout (``Avg latency: ... seconds``, ``50% percentile latency: ...``);
- ``vllm bench throughput --output-json`` (``requests_per_second``, ``tokens_per_second``)
  and its printout (``Throughput: 7.15 requests/s, 4656.00 total tokens/s, ...``);
- ``benchmark_serving`` / ``vllm bench serve`` result files (``--save-result`` JSON) and
  the printed ``Serving Benchmark Result`` block (TTFT, TPOT, ITL).

A vLLM log that ends in a Python exception (the engine refused to start) is not a result:
it raises a ParseError quoting the exception and its line. :func:`parse_vllm` is pure:
text in, rows out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.errors import InputError, ParseError
from gpulane.record import Row, RowWriter, new_run_id, write_parquet


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
    r"^(Mean|Median|P\d+(?:\.\d+)?|Std)\s+(TTFT|TPOT|ITL|E2EL)\s+\(ms\):\s*" + _NUM
)
_THROUGHPUT_RE = re.compile(
    r"Throughput:\s*" + _NUM + r"\s*requests/s,\s*" + _NUM + r"\s*total tokens/s"
    r"(?:,\s*" + _NUM + r"\s*output tokens/s)?"
)
_LATENCY_RE = re.compile(r"Avg latency:\s*" + _NUM + r"\s*seconds")
_PCT_RE = re.compile(r"^(\d+)% percentile latency:\s*" + _NUM + r"\s*seconds")


def _num(text: str) -> float | int:
    value = float(text)
    return (
        int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
    )


def check_error(text: str, source: str) -> None:
    """Raise a ParseError when the text is a vLLM log that ended in an exception."""
    lines = text.splitlines()
    tb = any(line.startswith("Traceback (most recent call last)") for line in lines)
    for number in range(len(lines), 0, -1):
        line = lines[number - 1].strip()
        if not line:
            continue
        m = _EXC_RE.match(line)
        if m and (tb or number == len(lines)):
            raise ParseError(
                f"a vLLM log that ends in an error, not a benchmark result: {m.group(1)}: "
                f"{m.group(2)}",
                source,
                number,
            )
        if tb:
            continue
        break


def parse_vllm(text: str, source: str = "<text>", meta: Meta | None = None) -> list[Row]:
    """Rows from one vLLM result file or printout."""
    meta = meta or Meta()
    if meta.run_id is None:  # one run id for every row of the file
        meta = dataclasses.replace(meta, run_id=new_run_id(meta.build or "vllm"))
    stripped = text.strip()
    if not stripped:
        raise ParseError("empty file: no vLLM benchmark result", source)
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise ParseError(f"not valid JSON ({err.msg})", source, err.lineno) from None
        items = data if isinstance(data, list) else [data]
        rows = []
        for item in items:
            if not isinstance(item, dict):
                raise ParseError("expected a JSON object of vLLM results", source)
            rows.append(_from_json(item, source, meta))
        return rows
    check_error(text, source)
    rows = []
    serving = _serving_text(text, source)
    if serving is not None:
        rows.append(_serving_row(serving, source, meta))
    m = _THROUGHPUT_RE.search(text)
    if m:
        values: dict[str, Any] = {
            "requests_per_second": float(m.group(1)),
            "tokens_per_second": float(m.group(2)),
        }
        if m.group(3):
            values["output_tokens_per_second"] = float(m.group(3))
        for key, name in (
            ("prompt", "total_num_prompt_tokens"),
            ("output", "total_num_output_tokens"),
        ):
            mm = re.search(rf"Total num {key} tokens:\s*(\d+)", text)
            if mm:
                values[name] = int(mm.group(1))
        rows.append(_throughput_row(values, source, meta))
    m = _LATENCY_RE.search(text)
    if m:
        pct = {}
        for line in text.splitlines():
            pm = _PCT_RE.match(line.strip())
            if pm:
                pct[pm.group(1)] = float(pm.group(2))
        rows.append(
            _latency_row({"avg_latency": float(m.group(1)), "percentiles": pct}, source, meta)
        )
    if not rows:
        raise ParseError(
            "no vLLM benchmark result found (expected a 'Serving Benchmark Result' block, a "
            "'Throughput:' line, an 'Avg latency:' line or --output-json JSON)",
            source,
        )
    return rows


def _serving_text(text: str, source: str) -> dict[str, Any] | None:
    values: dict[str, Any] = {}
    started = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if "Serving Benchmark Result" in line:
            started = True
            continue
        if not line or line.startswith("=") or line.startswith("-"):
            continue
        m = _METRIC_RE.match(line)
        if m:
            stat, metric, value = m.groups()
            stat = stat.lower()
            key = f"{stat}_{metric.lower()}_ms"
            values[key] = float(value)
            continue
        if ":" in line:
            name, _, value = line.rpartition(":")
            found = _SERVING_KEYS.get(name.strip())
            if found is None:
                continue
            key = found
            value = value.strip()
            try:
                values[key] = _num(value)
            except ValueError:
                values[key] = None if value in ("None", "inf") else value
                if value == "inf":
                    values[key] = float("inf")
        elif started and not _METRIC_RE.match(line):
            raise ParseError(f"unexpected line in the serving result: {line!r}", source, number)
    if not started:
        return None
    if "output_throughput" not in values:
        raise ParseError("serving result without 'Output token throughput'", source)
    return values


def _base(meta: Meta, source: str, op: str, engine_tp: Any = None) -> dict[str, Any]:
    return {
        "run_id": meta.run_id or new_run_id(meta.build or "vllm"),
        "kind": "tokens",
        "backend": "vllm",
        "op": op,
        "build": meta.build or "vllm",
        "model": meta.model,
        "tp": meta.tp if meta.tp is not None else engine_tp,
        "pp": meta.pp,
        "batch": meta.batch,
        "input_len": meta.input_len,
        "output_len": meta.output_len,
        "source": source,
    }


def _serving_row(v: dict[str, Any], source: str, meta: Meta) -> Row:
    base = _base(meta, source, "serving")
    base["model"] = base["model"] or v.get("model_id")
    if base["batch"] is None and isinstance(v.get("max_concurrency"), int):
        base["batch"] = v["max_concurrency"]
    itl = v.get("median_itl_ms")
    row = Row(
        **base,
        iters=v.get("completed"),
        tokens_per_s=v.get("output_throughput"),
        ttft_ms=v.get("mean_ttft_ms"),
        itl_ms_p50=itl,
        itl_ms_p99=v.get("p99_itl_ms"),
        time_us=(v["mean_tpot_ms"] * 1e3) if v.get("mean_tpot_ms") is not None else None,
        time_us_p50=(v["median_tpot_ms"] * 1e3) if v.get("median_tpot_ms") is not None else None,
        time_us_p99=(v["p99_tpot_ms"] * 1e3) if v.get("p99_tpot_ms") is not None else None,
        extra={**meta.extra, **{k: x for k, x in v.items() if _scalar(x)}},
    )
    return row


def _throughput_row(v: dict[str, Any], source: str, meta: Meta) -> Row:
    tokens = v.get("output_tokens_per_second")
    if tokens is None and v.get("elapsed_time") and meta.output_len and v.get("num_requests"):
        tokens = v["num_requests"] * meta.output_len / v["elapsed_time"]
    extra = {**meta.extra, **{k: x for k, x in v.items() if _scalar(x)}}
    if tokens is None:
        extra["note"] = "tokens_per_s counts prompt and output tokens (vLLM's total)"
        tokens = v.get("tokens_per_second")
    return Row(**_base(meta, source, "throughput"), tokens_per_s=tokens, extra=extra)


def _latency_row(v: dict[str, Any], source: str, meta: Meta) -> Row:
    avg = v.get("avg_latency")
    if not isinstance(avg, (int, float)):
        raise ParseError("latency result without a number in 'avg_latency'", source)
    pct = {str(k): float(x) for k, x in (v.get("percentiles") or {}).items()}
    lat = [float(x) for x in v.get("latencies") or []]
    extra: dict[str, Any] = {**meta.extra, "avg_latency_s": avg, "percentiles_s": pct}
    if lat:
        extra["latencies_s"] = lat
    tokens = None
    if meta.batch and meta.output_len:
        tokens = meta.batch * meta.output_len / avg
    return Row(
        **_base(meta, source, "latency"),
        iters=len(lat) or None,
        time_us=avg * 1e6,
        time_us_p50=pct["50"] * 1e6 if "50" in pct else None,
        time_us_p99=pct["99"] * 1e6 if "99" in pct else None,
        tokens_per_s=tokens,
        extra=extra,
    )


def _scalar(x: Any) -> bool:
    return isinstance(x, (int, float, str, bool)) or x is None


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


def read_text(name: str) -> str:
    try:
        return Path(name).read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise InputError(f"{name}: cannot read: {err.strerror or err}") from err


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gpulane parse vllm",
        description="vLLM bench latency/throughput JSON and benchmark_serving results as rows.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--json", action="store_true", help="print rows as JSON Lines")
    parser.add_argument("--out", metavar="DIR", help="write rows.jsonl and rows.parquet into DIR")
    parser.add_argument("--build", help="build label of the rows (default: vllm)")
    parser.add_argument("--run-id")
    parser.add_argument("--model")
    parser.add_argument("--tp", type=int)
    parser.add_argument("--pp", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--input-len", type=int)
    parser.add_argument("--output-len", type=int)
    try:
        args = parser.parse_args(argv)
    except SystemExit as ex:
        return int(ex.code) if isinstance(ex.code, int) else 2
    meta = Meta(
        build=args.build,
        run_id=args.run_id or new_run_id(args.build or "vllm"),
        model=args.model,
        tp=args.tp,
        pp=args.pp,
        batch=args.batch,
        input_len=args.input_len,
        output_len=args.output_len,
    )
    rows: list[Row] = []
    for name in args.files:
        rows += parse_vllm(read_text(name), str(name), meta)
    if args.out:
        with RowWriter(args.out) as writer:
            for row in rows:
                writer.write(row)
        write_parquet(args.out)
        sys.stderr.write(f"# {len(rows)} rows written to {Path(args.out) / 'rows.jsonl'}\n")
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps(row.to_dict(), default=str) + "\n")
    elif not args.out:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="vLLM results")
        for col in ("source", "op", "model", "tp", "tokens/s", "TTFT ms", "ITL p50", "ITL p99"):
            table.add_column(col)
        for r in rows:
            table.add_row(
                Path(r.source or "").name,
                r.op,
                str(r.model or "-"),
                str(r.tp or "-"),
                _f(r.tokens_per_s),
                _f(r.ttft_ms),
                _f(r.itl_ms_p50),
                _f(r.itl_ms_p99),
            )
        Console(highlight=False).print(table)
    return 0


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"
