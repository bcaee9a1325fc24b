"""Where a CI run's CPU went, from the kernel's process accounting (BSD acct: every process
that ended, with its CPU seconds, pid and parent): each process is charged to the part of
the run it descends from.

    accton /tmp/acct && CI=true bash .ci/run; accton off
    dump-acct /tmp/acct | gzip > acct.txt.gz
    python benchmarks/ci/cpu_by_part.py acct.txt.gz

Parts: ``slurm jobs`` (under slurmstepd: the batch scripts and the tasks of every Slurm
job), ``tests`` (under pytest: its workers, the CLI calls, their ranks and fork servers,
mpirun, Chromium), ``checks`` (ruff, mypy, the README figures, the mutation gate: under the
``bash -c`` that scripts/test.sh starts with nice), ``setup`` (the rest of .ci/run: apt,
pip, compileall, slurm-up), ``outside the run`` (other shells' processes meanwhile).
Daemons that outlive the run (slurmctld, slurmd, munged,
mariadbd) have no record: their CPU is what /proc/stat saw beyond these.
"""

from __future__ import annotations

import gzip
import sys
from collections import Counter
from dataclasses import dataclass

AHZ = 100


@dataclass
class Proc:
    comm: str
    cpu: float  # user + system seconds (acct counts in ticks of 1/AHZ s, AHZ = 100)
    pid: int
    ppid: int


def read(path: str) -> dict[int, Proc]:
    """dump-acct's lines: comm|v3|user|system|elapsed|uid|gid|mem|io|pid|ppid|..."""
    procs: dict[int, Proc] = {}
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            f = [x.strip() for x in line.split("|")]
            if len(f) < 11 or f[1] != "v3":
                continue
            # a pid may be reused: the later record wins, which only blurs a tree's edges
            procs[int(f[9])] = Proc(f[0], (float(f[2]) + float(f[3])) / AHZ, int(f[9]), int(f[10]))
    return procs


def part_of(
    proc: Proc, procs: dict[int, Proc], pytest_pid: int, checks_pid: int, run_pid: int
) -> str:
    seen = 0
    p: Proc | None = proc
    while p is not None and seen < 200:
        if p.comm.startswith("slurmstepd"):
            return "slurm jobs"
        if p.pid == pytest_pid:
            return "tests"
        if p.pid == checks_pid:
            return "checks"
        if p.pid == run_pid:
            return "setup"
        p = procs.get(p.ppid)
        seen += 1
    # not from the run: what else ran on the machine meanwhile (another shell's commands),
    # or a process whose parent left no record
    return "outside the run"


def main(path: str) -> None:
    procs = read(path)
    # pytest: the python3 whose children include the xdist workers (python3 too), started
    # by the bash of scripts/test.sh; the checks: that bash's other bash child with the
    # most CPU under it. Found by the shape of the tree, not by name.
    kids: dict[int, list[Proc]] = {}
    for p in procs.values():
        kids.setdefault(p.ppid, []).append(p)

    def below(pid: int) -> float:
        total, stack = 0.0, [pid]
        while stack:
            for k in kids.get(stack.pop(), []):
                total += k.cpu
                stack.append(k.pid)
        return total

    # pytest: the parent of the xdist workers (their names start "[pytest-xdist", which
    # their setproctitle wrote into comm); the checks: the bash beside it, under the bash of
    # scripts/test.sh, with the most CPU under it.
    def xdist(pid: int) -> bool:
        return pid in procs and procs[pid].comm.startswith("[pytest-xdist")

    # (a worker's own forks carry its name too: the master is the parent that does not)
    parents = Counter(p.ppid for p in procs.values() if xdist(p.pid) and not xdist(p.ppid))
    pytest_pid = parents.most_common(1)[0][0]
    test_sh = procs[pytest_pid].ppid
    checks_pid = max(
        (k for k in kids.get(test_sh, []) if k.pid != pytest_pid),
        key=lambda k: below(k.pid),
    ).pid
    parts: Counter[str] = Counter()
    comms: Counter[tuple[str, str]] = Counter()
    for p in procs.values():
        part = part_of(p, procs, pytest_pid, checks_pid, test_sh)
        parts[part] += p.cpu
        comms[(part, p.comm)] += p.cpu
    print(f"total {sum(parts.values()):.0f} CPU-s in {len(procs)} processes")
    for part, cpu in parts.most_common():
        print(f"part {part} {cpu:.0f}")
    for (part, comm), cpu in comms.most_common(25):
        print(f"comm {part} {comm} {cpu:.0f}")


if __name__ == "__main__":
    main(sys.argv[1])
