"""How long `gpulane history` takes over hundreds of runs (thousands of files).

    python benchmarks/history/bench.py OUT_TXT [--runs 400] [--tmp DIR]

Builds a results directory of RUNS run directories shaped like `gpulane sweep` writes
them (rows.jsonl + rows.parquet + config.yaml + preflight.json; 7 ops x 24 sizes x
in-place/out-of-place = 336 rows per run; one run in ten without Parquet, as a run that
was cut short), with a planted drop of all_reduce busbw from the run at 3/4 of the
series on (NCCL "2.29.1" there), then runs `python -m gpulane history DIR` three times
and writes one line per timing and what history said to OUT_TXT. The rows are generated
(no GPU): what is measured is gpulane's reading and judging, not a collective.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpulane.parquet_rows import write_parquet
from gpulane.record import Row, RowWriter

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
SIZES = [8 << i for i in range(24)]  # 8 B .. 64 MiB


def make(root: Path, runs: int) -> int:
    rng = random.Random(31)
    files = 0
    for i in range(runs):
        run_id = f"r{i:05d}-nvlink"
        nccl = "2.29.1" if i >= runs * 3 // 4 else "2.28.9"
        w = RowWriter(root / run_id, sync=False)
        for op in OPS:
            for size in SIZES:
                for in_place in (False, True):
                    peak = 340.0 * size / (size + 4e6)
                    if op == "all_reduce" and nccl == "2.29.1":
                        peak *= 0.85
                    bw = peak * (1 + rng.gauss(0, 0.004))
                    t = size / max(bw, 1e-6) / 1e3
                    w.write(
                        Row(run_id=run_id, kind="collective", backend="nccl", op=op,
                            build="nvlink", host="node1", world_size=4, size_bytes=size,
                            dtype="float", in_place=in_place, time_us=t, time_us_p50=t,
                            time_us_p99=t * 1.01, busbw_gbps=bw, algbw_gbps=bw, path="NV18",
                            started_at=f"2026-{1 + i // 200:02d}-{1 + (i // 8) % 25:02d}T"
                            f"{i % 8:02d}:00:00+00:00",
                            env={"NCCL_NVLS_ENABLE": "0"},
                            versions={"nccl": nccl, "cuda": "13.0", "driver": "580.95",
                                      "gpulane": "0.1.0", "gpu": "NVIDIA H200"})
                    )  # fmt: skip
        w.close()
        (root / run_id / "config.yaml").write_text("kind: sweep\n")
        (root / run_id / "preflight.json").write_text("{}\n")
        files += 3
        if i % 10 != 9:
            write_parquet(root / run_id)
            files += 1
    return files


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--tmp")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        root = Path(tmp) / "runs"
        t0 = time.perf_counter()
        files = make(root, args.runs)
        built = time.perf_counter() - t0
        lines = [
            f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.uname().nodename}, "
            f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}",
            f"built runs={args.runs} files={files} rows={args.runs * len(OPS) * len(SIZES) * 2} "
            f"seconds={built:.1f}",
        ]
        for rep in range(3):
            # CPU seconds of the child (every DuckDB thread) say the work whatever the load
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "gpulane", "history", str(root)],
                capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()},
            )  # fmt: skip
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            load = os.getloadavg()[0]
            lines.append(
                f"history rep={rep} rc={done.returncode} wall={wall:.2f} load={load:.1f} cpu={cpu:.2f}"
            )
        out = done.stdout.splitlines()
        lines += [
            ln.replace(str(root), "RUNS")
            for ln in out
            if not ln[:1].isalnum() or "REGRESSION" in ln
        ][:12]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
