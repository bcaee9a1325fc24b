"""The sweep's ETA against the time the sweep took, for five sweep shapes.

Each shape runs as a user runs it (``python3 -m gpulane sweep ...``, gloo on CPU ranks,
stderr a pipe, so the plain progress line is printed, every ``GPULANE_PROGRESS_S``); this
script reads the progress lines as they come, keeps the first one printed once 10 % of
the points are done, and compares the total it promises (the time so far + its ETA) with
the wall time the command took. One JSON line per shape::

    python benchmarks/cli/estimate_vs_actual.py benchmarks/cli/estimate-vs-actual.jsonl

``--only NAME`` runs one shape; the machine and its load average go to ``--machine``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CPU = ["device=cpu", "progress=true", "timeout_s=300"]
# name -> the sweep's arguments: sizes large enough that the last lines hold most of the
# time (as on a GPU), each 15-60 s on the 2-core machine at load 3-5, less on a larger one
SHAPES: dict[str, list[str]] = {
    "doubling-8B-128M": ["ranks=2", "sizes.min=8", "sizes.max=128M"],
    "two-collectives-1K-32M": [
        "ranks=2",
        "collectives=[all_reduce,all_gather]",
        "sizes.min=1K",
        "sizes.max=32M",
    ],
    "linear-4M-64M-step-4M": [
        "ranks=2",
        "sizes.min=4M",
        "sizes.max=64M",
        "sizes.step=4M",
        "iters=5",
    ],
    "two-dtypes-8B-32M": ["ranks=2", "dtype=[float,double]", "sizes.min=8", "sizes.max=32M"],
    "4-ranks-8B-16M": ["ranks=4", "sizes.min=8", "sizes.max=16M", "iters=10"],
}
LINE = re.compile(
    r"^# progress: (?P<done>\d+)/(?P<total>\d+) points, (?P<elapsed>\d+:\d\d:\d\d) elapsed, "
    r"ETA (?P<eta>\d+:\d\d:\d\d)(?: ±(?P<band>\d+) %| \((?P<rough>rough)\))?"
)
AT = 0.10  # the estimate after this share of the points
ROOT = Path(__file__).resolve().parents[2]


def seconds(clock: str) -> int:
    h, m, s = (int(x) for x in clock.split(":"))
    return h * 3600 + m * 60 + s


def run_shape(name: str, args: list[str], every_s: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="gpulane-eta-") as tmp:
        # the sweep runs in a scratch folder: this checkout's gpulane, installed or not
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "GPULANE_PROGRESS_S": str(every_s), "PYTHONPATH": path}
        for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(key, None)
        argv = [sys.executable, "-m", "gpulane", "sweep", *CPU, *args, f"results_dir={tmp}"]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        seen: list[tuple[float, str]] = []

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                seen.append((time.monotonic() - started, line.rstrip("\n")))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        status = proc.wait()
        actual = time.monotonic() - started
        reader.join(10)
        ranging_s = ranging_took(Path(tmp))
    at = None
    for when, line in seen:
        m = LINE.match(line)
        if m and int(m["done"]) >= max(1, math.ceil(AT * int(m["total"]))):
            at = (when, m)
            break
    record: dict[str, object] = {
        "shape": name,
        "args": " ".join(args),
        "status": status,
        "actual_s": round(actual, 2),
        "progress_lines": sum(1 for _, ln in seen if ln.startswith("# progress:")),
        # the ranging shot's wall time (rank 0's own account), before the first point
        "ranging_s": ranging_s,
        "ranging_pct": round(100 * ranging_s / actual, 1) if ranging_s is not None else None,
    }
    if at is None:
        record["error"] = "no progress line after 10 % of the points"
        record["stderr_tail"] = [ln for _, ln in seen][-5:]
        return record
    when, m = at
    eta = seconds(m["eta"])
    record.update(
        total_points=int(m["total"]),
        at_points=int(m["done"]),
        at_s=round(when, 2),
        eta_s=eta,
        band_pct=int(m["band"]) if m["band"] else None,
        rough=bool(m["rough"]),
        predicted_s=round(when + eta, 2),
        error_pct=round(100 * ((when + eta) / actual - 1), 1),
        # the time left as told against the time it took (the harder figure: the time
        # before the line, start-up included, is known exactly)
        left_error_pct=round(100 * (eta / (actual - when) - 1), 1),
        line=m.group(0),
    )
    return record


def ranging_took(results: Path) -> float | None:
    """The ranging shot's seconds, from the run directory's ``.heartbeat/ranging``."""
    for path in results.glob("*/.heartbeat/ranging"):
        for line in path.read_text(encoding="utf-8").splitlines():
            one = json.loads(line)
            if "took_s" in one:
                return round(float(one["took_s"]), 2)
    return None


def machine_lines() -> list[str]:
    load = os.getloadavg()
    return [
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"host: {platform.node()}",
        f"cpus: {os.cpu_count()}",
        f"python: {platform.python_version()}",
        f"platform: {platform.platform()}",
        f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="JSON Lines, one record per shape")
    parser.add_argument("--only", action="append", choices=sorted(SHAPES))
    # a progress line every 0.25 s, so that the one read comes soon after 10 % of the points
    parser.add_argument("--every", type=float, default=0.25, help="GPULANE_PROGRESS_S")
    parser.add_argument("--machine", type=Path, help="where the machine's lines go")
    opts = parser.parse_args()
    names = opts.only or list(SHAPES)
    before = machine_lines()
    with open(opts.out, "w", encoding="utf-8") as fh:
        for name in names:
            record = run_shape(name, SHAPES[name], opts.every)
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            print(json.dumps(record), flush=True)
    if opts.machine is not None:
        after = machine_lines()[-1].replace("load average", "load average at the end")
        opts.machine.write_text("\n".join([*before, after]) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
