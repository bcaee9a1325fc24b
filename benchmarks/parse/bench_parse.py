"""Memory and time of `gpulane parse nccl-tests FILE --out DIR` as the log grows.

Builds nccl-tests logs of the sizes asked (10, 100, 1000 MB by default) in a temporary
directory, by repeating the real captured logs in tests/fixtures (every single-test text
log of h200x2/ and public/nccl-tests/, one after another, so that the log holds many runs
of different collectives, formats and widths), or, with ``--shape long``, one test of 16
ranks whose table goes on (the shape ``-N`` cycles print), or, for ``--format json``, one -J JSON
document whose results are the real ones repeated. Then runs the command once per size in
a child process and records its wall time, CPU time (user + system, which other load on
the machine does not inflate as much) and peak resident memory (from wait4, for that child
alone), and the size of rows.jsonl (and of all the outputs). The table is printed as
Markdown; ``--json FILE`` also writes the figures.

    PYTHONPATH=$PWD python3 benchmarks/parse/bench_parse.py --sizes 10 100 1000
    PYTHONPATH=$PWD python3 benchmarks/parse/bench_parse.py --shape long --sizes 10 100
    PYTHONPATH=$PWD python3 benchmarks/parse/bench_parse.py --format json --sizes 10 100
    # the same logs through another checkout (e.g. the parser before streaming):
    python3 benchmarks/parse/bench_parse.py --code /tmp/base --sizes 10
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


def build_long_log(path: Path, size: int) -> None:
    """One test of 16 ranks whose table goes on until the log has its size: the shape that
    nccl-tests' ``-N`` cycles print (the same sizes again and again under one header)."""
    lines = LONG_SOURCE.read_text().splitlines(keepends=True)
    table = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
    first = lines.index(table[0])
    head, tail = lines[:first], lines[first + len(table) :]
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


def measure(log: Path, out: Path, code: Path) -> dict[str, Any]:
    """Run the parse command as a child; its wall time, CPU time and peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    cmd = [sys.executable, "-m", "gpulane.cli", "parse", "nccl-tests", str(log), "--out", str(out)]
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=log.parent
    )
    assert proc.stderr is not None
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.returncode = os.waitstatus_to_exitcode(status)
    rows_file = out / "rows.jsonl"
    rows = 0
    jsonl_bytes = rows_file.stat().st_size if rows_file.exists() else 0
    out_bytes = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) if out.exists() else 0
    if rows_file.exists():
        with open(rows_file, "rb") as fh:
            rows = sum(1 for _ in fh)
    return {
        "log_mb": round(log.stat().st_size / MB, 1),
        "exit": proc.returncode,
        "rows": rows,
        "jsonl_mb": round(jsonl_bytes / MB, 1),
        "out_mb": round(out_bytes / MB, 1),
        "jsonl_ratio": round(jsonl_bytes / log.stat().st_size, 2),
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "load_before": round(load, 1),
        "load_after": round(os.getloadavg()[0], 1),
        "stderr_tail": err.strip().splitlines()[-2:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000], help="MB")
    ap.add_argument("--format", choices=["text", "json"], default="text")
    ap.add_argument(
        "--shape",
        choices=["many", "long"],
        default="many",
        help="text logs: many short tests (the fixtures repeated) or one long table (-N)",
    )
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose gpulane to run")
    ap.add_argument("--tmp", type=Path, default=None, help="where to build the logs")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    results = []
    print(
        "| format | shape | log (MB) | rows | rows.jsonl (MB) | exit | wall (s) | CPU (s) "
        "| peak RSS (MB) | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="bench-parse-", dir=args.tmp) as tmp:
            log = Path(tmp) / f"nccl-tests-{size}mb.{'json' if args.format == 'json' else 'log'}"
            build = build_long_log if args.shape == "long" else build_text_log
            (build_json_log if args.format == "json" else build)(log, size * MB)
            shape = "one" if args.format == "json" else args.shape
            r = {
                "format": args.format,
                "shape": shape,
                **measure(log, Path(tmp) / "out", args.code),
            }
        results.append(r)
        print(
            f"| {r['format']} | {r['shape']} | {r['log_mb']} | {r['rows']} | {r['jsonl_mb']} | "
            f"{r['exit']} | {r['wall_s']} | "
            f"{r['cpu_s']} | {r['peak_rss_mb']} | {r['load_before']}-{r['load_after']} |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
