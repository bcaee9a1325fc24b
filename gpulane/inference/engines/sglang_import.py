"""`gpulane parse sglang FILE`: SGLang's one-batch benchmark (``python -m
sglang.bench_one_batch``, earlier ``sglang.bench_latency``) as tokens rows.

It writes, with ``--result-filename``, one JSON object a measured (batch, input_len,
output_len) (``prefill_latency`` and ``median_decode_latency`` in seconds, their
throughputs in tokens/s; some copies put the objects on many lines or back to back,
``}{``), and prints per configuration::

    Prefill. latency: 0.03508 s, throughput:   5700.84 token/s
    Decode.  latency: 0.01952 s, throughput:     51.23 token/s      (or "Decode 0. Batch size: 4, ...")
    Decode.  median latency: 0.01924 s, median throughput:     51.98 token/s
    Total. latency:  1.942 s, throughput:    154.52 token/s

Each configuration gives a ``prefill`` row (time_us the prefill of the whole batch, its
tokens/s the prompt tokens a second) and, with more than one output token, a ``decode``
row (time_us the median decode step, tokens/s the batch's tokens a second). The block
after "Warmup ..." is the benchmark's warm-up and gives no row. A block cut before its
``Total.`` line is reported as cut: its rows before the cut are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gpulane.errors import ParseError
from gpulane.inference.vllm_import import Meta, meta_from_options
from gpulane.record import Row, new_run_id
from gpulane.textio import iter_text_lines_ended

WHAT = "SGLang bench_one_batch results (--result-filename JSON Lines, or the printout)"
OPTIONS: dict[str, str] = {
    "model": "model of the rows",
    "tp": "tensor-parallel size of the run (--tp-size)",
    "pp": "pipeline-parallel size of the run",
    "batch": "batch size, where the printout does not say it",
    "input-len": "prompt tokens per request, where the printout does not say it",
    "output-len": "output tokens per request, where the printout does not say it",
}
ENGINE = "sglang"
_NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_PREFILL = re.compile(r"^Prefill\. latency:\s*" + _NUM + r" s, throughput:\s*" + _NUM + r" token/s")
_STEP = re.compile(r"^Decode(?: (\d+)\. Batch size: (\d+),|\.) +latency:\s*" + _NUM + r" s")
_MEDIAN = re.compile(
    r"^Decode\.\s+median latency:\s*" + _NUM + r" s, median throughput:\s*" + _NUM + r" token/s"
)
_TOTAL = re.compile(r"^Total\. latency:\s*" + _NUM + r" s, throughput:\s*" + _NUM + r" token/s")
_PREFIX = re.compile(r"^(?:\[[^\]]*\]\s*)?#?\s*")  # "[2026-02-26 10:25:20 TP0] " or "# "


def _base(meta: Meta, source: str, op: str, found: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": meta.run_id or new_run_id(meta.build or ENGINE),
        "kind": "tokens",
        "backend": ENGINE,
        "op": op,
        "build": meta.build or ENGINE,
        "model": meta.model or found.get("run_name"),
        "tp": meta.tp,
        "pp": meta.pp,
        "batch": found.get("batch_size") or meta.batch,
        "input_len": found.get("input_len") or meta.input_len,
        "output_len": found.get("output_len") or meta.output_len,
        "source": source,
    }


def _number(found: dict[str, Any], key: str, source: str) -> float | None:
    value = found.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ParseError(f"{key} is {value!r}, not a positive number", source)
    return float(value)


def result_rows(found: dict[str, Any], source: str, meta: Meta) -> list[Row]:
    """The rows of one result (a JSON object of bench_one_batch, or one printed block)."""
    prefill_s = _number(found, "prefill_latency", source)
    if prefill_s is None:
        raise ParseError("a result without prefill_latency", source)
    extra = {**meta.extra, "engine": ENGINE}
    extra.update({k: v for k, v in found.items() if isinstance(v, (int, float, str, bool))})
    rows = [
        Row(
            **_base(meta, source, "prefill", found),
            time_us=prefill_s * 1e6,
            tokens_per_s=_number(found, "prefill_throughput", source),
            ttft_ms=prefill_s * 1e3,
            extra=extra,
        )
    ]
    decode_s = _number(found, "median_decode_latency", source)
    if decode_s is not None:
        rows.append(
            Row(
                **_base(meta, source, "decode", found),
                time_us=decode_s * 1e6,
                time_us_p50=decode_s * 1e6,
                tokens_per_s=_number(found, "median_decode_throughput", source),
                itl_ms_p50=decode_s * 1e3,
                extra=extra,
            )
        )
    return rows


def _json_objects(text: str, source: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a result file, one a line or spread over lines, back to back."""
    decoder = json.JSONDecoder()
    at = 0
    while True:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if at >= len(text):
            return
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as err:
            raise ParseError(f"JSON cut off or damaged at character {err.pos}", source) from None
        if not isinstance(value, dict):
            raise ParseError("a JSON value that is no object", source)
        yield value


def _printed_rows(lines: Iterable[str], source: str, meta: Meta) -> Iterator[Row]:
    found: dict[str, Any] = {}
    warmup = False
    for raw in lines:
        line = _PREFIX.sub("", raw.strip(), count=1)
        if line.startswith("Warmup"):
            warmup, found = True, {}
        elif line.startswith("Benchmark"):
            warmup, found = False, {}
        elif m := _PREFILL.match(line):
            found = {"prefill_latency": float(m[1]), "prefill_throughput": float(m[2])}
        elif line.startswith("Prefill."):  # a block begun, its first line cut or damaged
            found = {"cut": line}
        elif (m := _STEP.match(line)) and m[2] and found:
            found.setdefault("batch_size", int(m[2]))
        elif (m := _MEDIAN.match(line)) and found:
            found["median_decode_latency"] = float(m[1])
            found["median_decode_throughput"] = float(m[2])
        elif (m := _TOTAL.match(line)) and found and "cut" not in found:
            found["total_latency"] = float(m[1])
            found["overall_throughput"] = float(m[2])
            if not warmup:
                yield from result_rows(found, source, meta)
            found = {}
    if found and not warmup:
        raise ParseError("the last result is cut off before its 'Total.' line", source)


def rows_from_text(text: str, source: str, meta: Meta | None = None) -> Iterator[Row]:
    """Rows of a result file (JSON) or of a printout; ParseError where neither is found."""
    meta = meta or Meta()
    body = text.lstrip("\ufeff \t\r\n")
    if body.startswith("{"):
        count = 0
        for obj in _json_objects(body, source):
            rows = result_rows(obj, source, meta)
            count += 1
            yield from rows
        if not count:
            raise ParseError("no result in the JSON", source)
        return
    count = 0
    for row in _printed_rows(body.splitlines(), source, meta):
        count += 1
        yield row
    if not count:
        raise ParseError(
            "no SGLang result: neither JSON objects with prefill_latency nor a "
            "'Prefill. latency: ... Total. latency: ...' block",
            source,
        )


def read_sglang(path: str | Path, meta: Meta | None = None) -> Iterator[Row]:
    """Rows of an SGLang result file, read through gpulane.textio (any encoding it reads).
    A last line without its line break may hold a number cut short: only JSON reads it
    (where a cut shows as an object left open), a printout leaves it out."""
    lines = list(iter_text_lines_ended(path))
    text = "\n".join(line for _, line, _ in lines)
    if lines and not lines[-1][2] and not text.lstrip("\ufeff \t\r\n").startswith("{"):
        text = "\n".join(line for _, line, _ in lines[:-1])
    return rows_from_text(text, str(path), meta)


def stream_rows(
    path: str, *, run_id: str | None, build: str | None, **options: str | None
) -> Iterator[Row]:
    """The importer contract (gpulane.session.imports): rows of one file."""
    return read_sglang(path, meta_from_options(run_id, build, **options))


def render(rows: Iterable[Row], console: Any) -> None:
    """One line per row: phase, batch, lengths, the step time and tokens/s."""
    head = f"{'op':<8} {'batch':>5} {'input':>6} {'output':>6} {'time ms':>10} {'tokens/s':>11}"
    console.print(head, markup=False, highlight=False, style="bold")
    for r in rows:
        if r.status != "ok":
            console.print(f"error: {r.error}", markup=False, highlight=False, style="red")
            continue
        ms = "-" if r.time_us is None else f"{r.time_us / 1e3:.3f}"
        rate = "-" if r.tokens_per_s is None else f"{r.tokens_per_s:.2f}"
        console.print(
            f"{r.op:<8} {r.batch or '-'!s:>5} {r.input_len or '-'!s:>6} "
            f"{r.output_len or '-'!s:>6} {ms:>10} {rate:>11}",
            markup=False,
            highlight=False,
        )
