"""The README-walk steps that need no earlier step, run through the walk's own
``run_step`` (tests/test_readme_walk.py), for comparing the walk's CPU before and after a
change without its slow measuring steps:

    python benchmarks/ci/cpu_tree.py --label before --label after --rounds 2 -- \\
        env -C BEFORE python3 benchmarks/ci/readme_walk_steps.py ::: \\
        env -C AFTER python3 benchmarks/ci/readme_walk_steps.py

Run from a checkout's root (it imports that checkout's tests).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

WANT = ["sweep --help", "sweep nranks=4", "sweep collectives=all_reduce all_gather",
        "sweep -m preset=nvlink,pcie-host,socket", "topo", "topo --json", "copy",
        "accept --rules", "parse --help", "sweep sizes.min=1M sizes.max=4M build=cpu-gloo"]  # fmt: skip


def main() -> int:
    sys.path.insert(0, ".")
    from tests.test_readme_walk import STEPS, run_step

    tmp = Path(tempfile.mkdtemp(prefix="walk-steps-"))
    steps = {s.argv: s for s in STEPS}
    for argv in WANT:
        out = run_step(steps[argv], tmp)
        if out.returncode not in steps[argv].exits:
            print(f"step `gpulane {argv}` exited {out.returncode}: {out.stderr[-500:]}")
            return 1
    print("steps", len(WANT), "ok")
    return 0


if __name__ == "__main__":  # the forked CLI's server imports this module again
    sys.exit(main())
