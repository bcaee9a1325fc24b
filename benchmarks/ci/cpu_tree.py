"""The CPU seconds of a command and of every process it started, also those that outlive
it: the tests' forked CLI runs under a fork server that pytest leaves behind when it
exits, so ``/usr/bin/time`` and ``getrusage(RUSAGE_CHILDREN)`` in pytest miss them.

This process becomes a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): orphans are
handed to it, it waits for them all, and their CPU (and that of whatever they waited for)
lands in its own ``RUSAGE_CHILDREN``.

    python benchmarks/ci/cpu_tree.py --label NAME --rounds 2 -- CMD [ARGS...]
    python benchmarks/ci/cpu_tree.py --label before --label after --rounds 2 -- A ::: B

With two labels, the commands (split at ``:::``) alternate round by round (A B A B), so a
change in the machine's load falls on both. One line per run:
``label=NAME round=N cpu_s=... wall_s=... rc=... load=...`` (load: the 1-minute load
average when the run started).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _reap_all() -> None:
    """Wait for every child and adopted orphan until none is left."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def measure(command: list[str]) -> tuple[float, float, int]:
    """(CPU seconds of the whole process tree, wall seconds, exit status)."""
    cpu, wall = _children_cpu(), time.monotonic()
    proc = subprocess.Popen(command)
    rc = proc.wait()
    _reap_all()  # the orphans: fork servers, daemons the command left behind
    return _children_cpu() - cpu, time.monotonic() - wall, rc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", action="append", required=True)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    words = args.command[1:] if args.command[:1] == ["--"] else args.command
    commands: list[list[str]] = [[]]
    for w in words:
        if w == ":::":
            commands.append([])
        else:
            commands[-1].append(w)
    if len(commands) != len(args.label) or not all(commands):
        parser.error("give one command per --label, split by ':::'")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        parser.error("cannot become a child subreaper (Linux only)")
    for n in range(args.rounds):
        for label, command in zip(args.label, commands, strict=True):
            load = os.getloadavg()[0]
            cpu, wall, rc = measure(command)
            print(f"label={label} round={n} cpu_s={cpu:.2f} wall_s={wall:.2f} rc={rc} "
                  f"load={load:.2f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
