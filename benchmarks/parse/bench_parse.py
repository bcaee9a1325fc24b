"""Memory and time of `python3 -m gpulane parse nccl-tests FILE --out DIR`, as a user runs it.

Builds an nccl-tests log of each size asked (10, 20, 100 MB by default) in a temporary
directory, in one of these shapes:

- ``many``: many runs one after another (a log of many nccl-tests invocations): every
  single-test text log captured in tests/fixtures (h200x2/ and public/nccl-tests/: new and
  old formats, 2 to 16 ranks, per-iteration columns, a failed run), repeated in turn;
- ``long``: one test of 16 ranks whose table goes on (the same sizes again and again under
  one header, as nccl-tests' ``-N`` cycles print), then its summary;
- ``long-cut``: the same table cut in the middle of a line, without a summary (a run
  killed or a log copied while it was written): its last row is an error row;
- ``json`` (``--format json``): one -J JSON document whose results are the real ones
  repeated.

Then runs the command once per size in a child process, its printed table going to a file
as a redirected run's would (``--stdout`` to change that), and records its wall time, CPU
time (user + system) and peak resident memory (``wait4``: that child alone, rows.parquet
included: the command writes it before it exits), the size of rows.jsonl and of all the
outputs, and the load average before and after. The table is printed as Markdown;
``--json FILE`` also writes the figures (what benchmarks/parse/README.md's figures block
reads).

    python3 benchmarks/parse/bench_parse.py --shape long-cut --sizes 10 20 100 --json long-cut.json
    python3 benchmarks/parse/bench_parse.py --shape many --sizes 10 20 100 --json many.json
    # the same logs through another checkout (e.g. the code before a change):
    git archive <commit> | tar -x -C /tmp/base
    python3 benchmarks/parse/bench_parse.py --code /tmp/base --shape long-cut --sizes 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
MB = 1_000_000


def text_blocks() -> list[str]:
    """Every single-test text log captured (the concatenated one is made of these)."""
    paths = sorted((FIXTURES / "h200x2").glob("nccl-tests-*.txt"))
    paths += sorted(
        p
        for p in (FIXTURES / "public" / "nccl-tests").glob("*.txt")
        if "concatenated" not in p.name
    )
    blocks = []
    for p in paths:
        text = p.read_text()
        blocks.append(text if text.endswith("\n") else text + "\n")
    return blocks


def build_text_log(path: Path, size: int) -> None:
    blocks = text_blocks()
    written = k = 0
    with open(path, "w") as fh:
        while written < size:
            block = blocks[k % len(blocks)]
            fh.write(block)
            written += len(block.encode())
            k += 1


LONG_SOURCE = FIXTURES / "public" / "nccl-tests" / "a3mega_2node_16xH100_mpirun_all_reduce_8G.txt"


def _long_parts() -> tuple[list[str], list[str], list[str]]:
    """The long log's source as its header lines, table lines and summary lines."""
    lines = LONG_SOURCE.read_text().splitlines(keepends=True)
    table = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
    first = lines.index(table[0])
    return lines[:first], table, lines[first + len(table) :]


def build_long_log(path: Path, size: int, summary: bool = True) -> None:
    """One test of 16 ranks whose table goes on until the log has its size: the shape that
    nccl-tests' ``-N`` cycles print (the same sizes again and again under one header)."""
    head, table, tail = _long_parts()
    if not summary:
        tail = []
    with open(path, "w") as fh:
        fh.write("".join(head))
        written = sum(len(ln.encode()) for ln in head + tail)
        k = 0
        while written < size:
            line = table[k % len(table)]
            fh.write(line)
            written += len(line.encode())
            k += 1
        fh.write("".join(tail))


def build_json_log(path: Path, size: int) -> None:
    """One -J document: the real all_reduce results repeated, under its real head and tail."""
    data = json.loads((FIXTURES / "h200x2" / "nccl-tests-all_reduce.json").read_text())
    results = data.pop("results")
    tail = {
        k: data.pop(k) for k in ("out_of_bounds", "average_bus_bandwidth", "errors", "end_time")
    }
    head = json.dumps(data, indent=1)[:-2]  # without the closing "\n}"
    items = [json.dumps(r, indent=1).replace("\n", "\n  ") for r in results]
    with open(path, "w") as fh:
        fh.write(head + ',\n "results": [\n  ')
        written = len(head)
        k = 0
        while written < size:
            item = items[k % len(items)]
            fh.write(("" if k == 0 else ",\n  ") + item)
            written += len(item) + 4
            k += 1
        fh.write("\n ],\n" + json.dumps(tail, indent=1)[2:])


def build_long_cut_log(path: Path, size: int) -> None:
    """The long table without its summary, its last line cut in the middle."""
    build_long_log(path, size, summary=False)
    with open(path, "a") as fh:
        fh.write(_long_parts()[1][0][:40])  # size, count, type, redop: no results


BUILDERS = {"many": build_text_log, "long": build_long_log, "long-cut": build_long_cut_log}


def measure(log: Path, out: Path, code: Path, stdout: str) -> dict[str, Any]:
    """Run the user's command as a child; its wall time, CPU time and peak RSS."""
    # the code measured first; a PYTHONPATH already set stays after it (where the
    # dependencies are on a path of their own, as on the GPU machines' carried wheels)
    path = os.pathsep.join(p for p in (str(code), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    cmd = [sys.executable, "-m", "gpulane", "parse", "nccl-tests", str(log), "--out", str(out)]
    printed = out.parent / "printed.txt" if stdout == "file" else os.devnull
    load = os.getloadavg()[0]
    start = time.monotonic()
    with open(printed, "w") as sink:
        proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.PIPE, cwd=log.parent)
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    rows_file = out / "rows.jsonl"
    rows = 0
    jsonl_bytes = rows_file.stat().st_size if rows_file.exists() else 0
    out_bytes = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) if out.exists() else 0
    if rows_file.exists():
        with open(rows_file, "rb") as fh:
            rows = sum(1 for _ in fh)
    parquet_rows = None
    if (out / "rows.parquet").exists():
        import pyarrow.parquet as pq

        parquet_rows = pq.ParquetFile(out / "rows.parquet").metadata.num_rows
    return {
        "log_mb": round(log.stat().st_size / MB, 1),
        "exit": proc.returncode,
        "rows": rows,
        "parquet_rows": parquet_rows,
        "jsonl_mb": round(jsonl_bytes / MB, 1),
        "out_mb": round(out_bytes / MB, 1),
        "jsonl_ratio": round(jsonl_bytes / log.stat().st_size, 2),
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "load_before": round(load, 1),
        "load_after": round(os.getloadavg()[0], 1),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() - wall)),
        "stderr_tail": err.strip().splitlines()[-2:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 100], help="MB")
    ap.add_argument("--format", choices=["text", "json"], default="text")
    ap.add_argument("--shape", choices=list(BUILDERS), default="many", help="text logs (above)")
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose gpulane to run")
    ap.add_argument("--tmp", type=Path, default=None, help="where to build the logs")
    ap.add_argument("--stdout", choices=["file", "devnull"], default="file")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    results = []
    print(
        "| shape | log (MB) | rows | rows.jsonl (MB) | exit | wall (s) | CPU (s) "
        "| peak RSS (MB) | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="bench-parse-", dir=args.tmp) as tmp:
            log = Path(tmp) / f"nccl-tests-{size}mb.{'json' if args.format == 'json' else 'log'}"
            (build_json_log if args.format == "json" else BUILDERS[args.shape])(log, size * MB)
            shape = "json" if args.format == "json" else args.shape
            r = {"shape": shape, **measure(log, Path(tmp) / "out", args.code, args.stdout)}
        results.append(r)
        print(
            f"| {r['shape']} | {r['log_mb']} | {r['rows']} | {r['jsonl_mb']} | {r['exit']} | "
            f"{r['wall_s']} | {r['cpu_s']} | {r['peak_rss_mb']} | "
            f"{r['load_before']}-{r['load_after']} |",
            flush=True,
        )
        if args.json:  # after each size: a long round keeps what it measured
            args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
