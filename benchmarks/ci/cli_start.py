"""What a test's CLI call costs to start, two pairs side by side, alternated round after
round, each charged the machine's CPU seconds (/proc/stat, every process) while it ran:

- ``fresh`` against ``forked``: the same 2-rank gloo sweep (one 1 KiB all_reduce) as
  ``python -m gpulane`` in a new interpreter, and forked from the tests' server that
  imported Hydra, pandas, pyarrow and rich (``tests/forked_cli.py``);
- ``torch`` against ``driver``: how a CPU host learned it has no GPU before session 6
  (``import torch; torch.cuda.is_available()``), and now (``local_gpus()``, which looks
  for the driver's device files first).

    python benchmarks/ci/cli_start.py --rounds 8 > benchmarks/ci/cli-start.txt

One line per run (``way=forked cpu_s=2.51 wall_s=2.2 rc=0``), then the medians of each
pair and their ratio. Run it on an otherwise idle machine, from the repository root.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.ci.rank_start import SWEEP, machine_cpu_s
from tests import forked_cli

WORLD = {
    "torch": "import torch; torch.cuda.is_available()",
    "driver": "from gpulane.session.world import local_gpus; local_gpus()",
}


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def ways(results: Path) -> dict[str, Callable[[], int]]:
    args = [*SWEEP, f"results_dir={results}"]
    return {
        "fresh": lambda: (
            subprocess.run(
                [sys.executable, "-m", "gpulane", *args], env=_env(), capture_output=True
            ).returncode
        ),
        "forked": lambda: forked_cli.run(args, Path.cwd(), _env(), timeout=300).returncode,
        **{
            name: (lambda code=code: subprocess.run([sys.executable, "-c", code]).returncode)
            for name, code in WORLD.items()
        },
    }


def one(run: Callable[[], int]) -> tuple[float, float, int]:
    cpu, wall = machine_cpu_s(), time.monotonic()
    rc = run()
    took = time.monotonic() - wall
    time.sleep(0.5)  # the last ticks of a killed fork server land in /proc/stat
    return machine_cpu_s() - cpu, took, rc


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as results:
        runs = ways(Path(results))
        for run in runs.values():  # warm the page cache and the tests' fork server
            one(run)
        for r in range(args.rounds):
            for pair in (("fresh", "forked"), ("torch", "driver")):
                for way in pair if r % 2 == 0 else pair[::-1]:
                    c, w, rc = one(runs[way])
                    print(f"way={way} cpu_s={c:.2f} wall_s={w:.2f} rc={rc}", flush=True)
                    if rc != 0:
                        return rc
                    cpu.setdefault(way, []).append(c)
    for new, old in (("forked", "fresh"), ("driver", "torch")):
        a, b = statistics.median(cpu[new]), statistics.median(cpu[old])
        print(f"median {new}={a:.2f} {old}={b:.2f} ratio={a / b:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
