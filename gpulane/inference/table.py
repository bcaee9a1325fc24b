"""How a token-rate run shows: a progress line per decode configuration as it lands, and
one table of prefill and decode side by side at the end."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from gpulane.record import Row
from gpulane.units import format_size


def _fmt(value: Any, spec: str = ".1f") -> str:
    if value is None:
        return "-"
    try:
        return format(float(value), spec)
    except (TypeError, ValueError):
        return str(value)


def _of(row: Row | None, name: str) -> Any:
    """A field of a row a configuration may lack (no prefill row, say): None then."""
    return None if row is None else getattr(row, name)


def progress_line(row: Row) -> str:
    return (
        f"  batch {row.batch:>4}  in {row.input_len:>5}  out {row.output_len:>4}  "
        f"decode {_fmt(row.tokens_per_s)} tok/s  ITL p50 {_fmt(row.itl_ms_p50, '.2f')} ms  "
        f"TTFT {_fmt(row.ttft_ms, '.1f')} ms"
    )


def comm_text(calls: list[dict[str, Any]] | None) -> str:
    parts = []
    for c in calls or []:
        if c.get("op") == "all_reduce":
            parts.append(f"{c['count']}x{format_size(int(c['size_bytes']))}")
    return ", ".join(parts) or "-"


def results_table(rows: list[Row]) -> Table:
    """One line per configuration: prefill and decode side by side."""
    by_key: dict[tuple[Any, ...], dict[str, Row]] = {}
    for r in rows:
        key = (
            r.model,
            r.tp,
            r.pp,
            r.batch,
            r.input_len,
            r.output_len,
        )
        by_key.setdefault(key, {})[r.op] = r
    scaled = any((r.extra or {}).get("tokens_per_s_scaled") for r in rows)
    table = Table(title="tokens (prefill and decode)", show_lines=False)
    for name in ("model", "tp", "pp", "batch", "in", "out"):
        table.add_column(name, justify="right")
    table.add_column("prefill tok/s", justify="right")
    table.add_column("TTFT ms", justify="right")
    table.add_column("decode tok/s", justify="right")
    table.add_column("per seq", justify="right")
    table.add_column("ITL p50 ms", justify="right")
    table.add_column("ITL p99 ms", justify="right")
    table.add_column("comm % pre/dec", justify="right")
    table.add_column("all-reduce/step (decode)", justify="left")
    if scaled:
        table.add_column("decode tok/s (all layers)", justify="right")
    for key, ops in by_key.items():
        pre, dec = ops.get("prefill"), ops.get("decode")
        share = "/".join(
            "-" if _of(r, "comm_share") is None else f"{100 * float(_of(r, 'comm_share')):.0f}"
            for r in (pre, dec)
        )
        dextra = (dec.extra if dec is not None else None) or {}
        cells = [str(k) for k in key] + [
            _fmt(_of(pre, "tokens_per_s"), ".0f"),
            _fmt(_of(pre, "ttft_ms"), ".1f"),
            _fmt(_of(dec, "tokens_per_s"), ".1f"),
            _fmt(dextra.get("tokens_per_s_per_seq"), ".1f"),
            _fmt(_of(dec, "itl_ms_p50"), ".2f"),
            _fmt(_of(dec, "itl_ms_p99"), ".2f"),
            share,
            comm_text(dextra.get("comm_per_step")),
        ]
        if scaled:
            cells.append(_fmt(dextra.get("tokens_per_s_scaled"), ".1f"))
        table.add_row(*cells)
    return table


class TokensView:
    """The session's view of a tokens run."""

    def __init__(self, configurations: int) -> None:
        self.total: int | None = configurations
        self.decoded = 0

    def add(self, row: Row) -> list[Any]:
        if row.op != "decode" or row.status != "ok":
            return []
        self.decoded += 1
        return [progress_line(row)]

    def flush(self) -> list[Any]:
        return []

    def done(self) -> int:
        return self.decoded

    def current(self) -> str:
        return "decode"

    def state_of_note(self, note: str) -> str | None:
        """A rank's "# compiling… WHAT" note, as the progress line's state."""
        text = note.removeprefix("# ")
        return text.split(" (")[0] if text.startswith("compiling") else None

    def summary(self, rows: list[Row]) -> list[Any]:
        ok = [r for r in rows if r.kind == "tokens" and r.status == "ok"]
        if not ok:
            return []
        out: list[Any] = [results_table(ok)]
        note = next(
            (r.extra["scaled_note"] for r in ok if (r.extra or {}).get("scaled_note")),
            None,
        )
        if note:
            out.append(f"# {note}")
        return out

    def problems(self, rows: list[Row]) -> list[str]:
        return []
