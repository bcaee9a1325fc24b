"""`gpulane results [PATHS...]`: list and filter the rows of run directories."""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from gpulane.analysis.compare import markdown_table
from gpulane.analysis.store import Filters, ResultStore
from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError

# Columns shown by default, per kind present (all with --columns all).
BASE = ["run_id", "build", "kind", "backend", "op"]
PER_KIND = {
    "collective": [
        "world_size",
        "dtype",
        "in_place",
        "size_bytes",
        "time_us",
        "algbw_gbps",
        "busbw_gbps",
        "wrong",
    ],
    "copy": ["memory", "src", "dst", "size_bytes", "algbw_gbps", "expected_gbps", "efficiency"],
    "tokens": ["model", "tp", "pp", "batch", "tokens_per_s", "ttft_ms", "itl_ms_p50"],
}
TAIL = ["path", "status"]

EPILOG = """\
examples:
  gpulane results                                   # every row under ./runs
  gpulane results runs/ --kind collective --op all_reduce --build nvlink
  gpulane results --where 'size_bytes >= 2**30 and busbw_gbps < 300' --format csv
  gpulane results --sql "select build, max(busbw_gbps) from rows group by build"   # DuckDB
"""


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="gpulane results",
        description="List and filter stored rows (JSON Lines and Parquet of every run type).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths", nargs="*", metavar="PATH", help="run dirs, groups or rows files (default: runs)"
    )
    p.add_argument(
        "--kind", action="append", default=[], help="collective, copy, tokens (comma list)"
    )
    p.add_argument("--op", action="append", default=[], help="op names, wildcards allowed")
    p.add_argument("--build", action="append", default=[])
    p.add_argument("--run", action="append", default=[], help="run ids")
    p.add_argument("--status", action="append", default=[], help="ok, error, ...")
    p.add_argument("--size-min")
    p.add_argument("--size-max")
    p.add_argument("--where", help="a pandas query over the row columns")
    p.add_argument("--sql", help="SQL over table `rows` (needs the optional duckdb)")
    p.add_argument("--columns", help="comma list of columns, or `all`")
    p.add_argument("--sort", help="comma list of columns to sort by")
    p.add_argument("--limit", type=int)
    p.add_argument("--format", choices=("table", "csv", "json", "markdown"), default="table")
    return p


def _known(frame: pd.DataFrame, wanted: str, option: str) -> list[str]:
    """The comma list of column names ``wanted``, each checked against the frame."""
    cols = [c.strip() for c in wanted.split(",") if c.strip()]
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        import difflib

        close = difflib.get_close_matches(missing[0], [str(c) for c in frame.columns], n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise InputError(
            f"{option}: no column {', '.join(missing)}{hint}; `gpulane results --columns all` "
            "shows them all"
        )
    return cols


def _where_hint(err: InputError, store: ResultStore, filters: Filters) -> InputError:
    """``--where 'busbw > 100'``: the column meant (busbw_gbps), as --sort and --columns say."""
    import dataclasses
    import difflib
    import re

    m = re.search(r"name '(\w+)' is not defined", str(err))
    if m is None or not filters.where:
        return err
    columns = [str(c) for c in store.select(dataclasses.replace(filters, where=None)).columns]
    name = m.group(1)
    close = [c for c in columns if c.startswith(f"{name}_")]
    close = close or difflib.get_close_matches(name, columns, n=1)
    if not close:
        return InputError(f"{err}; `gpulane results --columns all` shows the columns")
    fixed = re.sub(rf"\b{name}\b", close[0], filters.where)
    return InputError(
        f"--where {filters.where!r}: no column {name} (did you mean {close[0]}? --where {fixed!r})"
    )


def _columns(frame: pd.DataFrame, wanted: str | None) -> list[str]:
    if wanted == "all":
        return list(frame.columns)
    if wanted:
        return _known(frame, wanted, "--columns")
    cols = list(BASE)
    for kind in ("collective", "copy", "tokens"):
        if (frame["kind"] == kind).any():
            cols += [c for c in PER_KIND[kind] if c not in cols]
    return cols + TAIL


def _cell(v: object) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "-"
    if isinstance(v, float):
        # Fixed decimals, as nccl-tests prints them: 0.000 for a figure too small to
        # matter, never 3.77051e-06 beside 16.532.
        return f"{v:.3f}" if abs(v) < 1e6 else f"{v:.0f}"
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return str(v)


def plain_table(frame: pd.DataFrame, cols: list[str]) -> str:
    """The rows as aligned text columns, numbers to the right, never cut to the terminal's
    width (a cut run id or figure is a wrong one; `less -S` scrolls a long line). Written
    directly rather than through rich's Table, which spent 5-6 s laying out 1,500 rows."""
    cells = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(cols)]
    right = [pd.api.types.is_numeric_dtype(frame[c]) for c in cols]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    body = [line(cols), rule, *(line(c) for c in cells)]
    return f"{len(frame)} rows\n" + "\n".join(body) + "\n"


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    store = ResultStore(args.paths or ["runs"])
    if args.sql:
        dropped = [
            o
            for o, v in (("--where", args.where), ("--kind", args.kind), ("--op", args.op),
                         ("--build", args.build), ("--run", args.run), ("--status", args.status),
                         ("--size-min", args.size_min), ("--size-max", args.size_max))
            if v
        ]  # fmt: skip
        if dropped:
            raise InputError(
                f"--sql with {', '.join(dropped)}: the filters do not apply to SQL; put the "
                "condition in the query's where clause instead"
            )
        frame = store.sql(args.sql)
        cols = list(frame.columns)
    else:
        filters = Filters(
            kind=args.kind,
            op=args.op,
            build=args.build,
            run=args.run,
            status=args.status,
            where=args.where,
            size_min=args.size_min,
            size_max=args.size_max,
        )
        try:
            frame = store.select(filters)
        except InputError as err:
            raise _where_hint(err, store, filters) from None
        if frame.empty and len(store.frame):
            why = filters.why_empty(store.frame)
            if why is None:
                given = [
                    f"{o} {v}"
                    for o, v in (("--size-min", args.size_min), ("--size-max", args.size_max),
                                 ("--where", args.where))
                    if v
                ]  # fmt: skip
                why = f"{' '.join(given)}: no row passes" if given else None
            if why:
                raise InputError(why)
        cols = _columns(frame, args.columns)
    if args.sort:
        frame = frame.sort_values(_known(frame, args.sort, "--sort"), kind="stable")
    if args.limit is not None:
        frame = frame.head(args.limit)
    shown, frame = frame, frame[cols]
    if args.format == "csv":
        sys.stdout.write(frame.to_csv(index=False))
    elif args.format == "json":
        for rec in json.loads(frame.to_json(orient="records", default_handler=str)):
            print(json.dumps(rec))
    elif args.format == "markdown":
        sys.stdout.write(markdown_table(frame.map(_cell)))
    else:
        sys.stdout.write(plain_table(frame, cols))
    if args.format == "table" and not args.sql:
        from gpulane.analysis.reference import reference_lines

        for ref_line in reference_lines(shown, (args.paths or ["runs"])[0]):
            print(ref_line)
    return 0
