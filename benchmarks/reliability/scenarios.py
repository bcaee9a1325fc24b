"""Reliability scenarios of issue 11, run for real: faults injected into live runs.

    python benchmarks/reliability/scenarios.py [--only NAME,...] [--json OUT] [--md OUT]

Each scenario starts ``gpulane sweep`` as a user does (a subprocess in its own session,
gloo ranks on CPU), waits until it has written some rows, injects one real fault, and
records: the time from the fault to the front's exit, the finished rows on disk before
the fault and after the exit (rows lost must be 0), whether an error row and the Parquet
copy were written, the exit status, and the line the user saw on stderr.

Local launcher scenarios need no setup; mount-based ones (read-only and full filesystems)
need root (``mount -t tmpfs``). Slurm scenarios need the real Slurm of
``scripts/slurm-up.sh`` (``launcher=slurm``); run directories must be on a filesystem the
tasks see (here: the same machine).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# Slow enough on 2 CPU cores that a fault lands mid-sweep: 11 points, ~0.5 s each.
SWEEP = [
    "sweep",
    "ranks=2",
    "device=cpu",
    "collectives=all_reduce",
    "sizes.min=1K",
    "sizes.max=1M",
    "sizes.factor=2",
    "warmup=1",
    "iters=100",
    "progress=false",
]
# The GPU variants (2 GPUs, NCCL): big enough all_reduces that a kill lands inside one.
GPU_SWEEP = [
    "sweep",
    "device=cuda",
    "backend=torch",
    "collectives=all_reduce",
    "sizes.min=16M",
    "sizes.max=1G",
    "sizes.factor=2",
    "warmup=2",
    "iters=200",
    "progress=false",
]
SLURM = [
    "launcher=slurm",
    "launcher.tasks_per_node=2",
    "launcher.poll_s=0.5",
    "launcher.time=5",
]


@dataclass
class Outcome:
    scenario: str
    launcher: str
    fault: str
    expected_status: int
    bound_s: float | None
    status: int | None = None
    detect_s: float | None = None
    rows_before: int | None = None
    rows_after: int | None = None
    rows_lost: int | None = None
    error_row: bool | None = None
    parquet: bool | None = None
    message: str = ""
    notes: list[str] = field(default_factory=list)
    run: str | None = None
    expect_parquet: bool = True  # False where the fault leaves no room for one

    @property
    def passed(self) -> bool:
        if self.status is None:
            return False
        ok = self.status == self.expected_status and (self.rows_lost or 0) == 0
        if self.expect_parquet and self.rows_after:
            ok = ok and bool(self.parquet)
        if self.bound_s is not None and self.detect_s is not None:
            ok = ok and self.detect_s <= self.bound_s
        return ok


# ----------------------------------------------------------------------------- helpers


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


class Front:
    """``gpulane ...`` started as a user does, in its own session (for a Ctrl-C to the
    whole process group, as a terminal sends it)."""

    def __init__(self, args: list[str], work: Path) -> None:
        self.work = work
        self.out = open(work / "front.out", "w+")  # noqa: SIM115 - closed in result()
        self.err = open(work / "front.err", "w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpulane.cli", *args],
            cwd=work,
            env=_env(),
            stdout=self.out,
            stderr=self.err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait(self, limit: float) -> tuple[int | None, float]:
        t0 = time.monotonic()
        try:
            self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None, time.monotonic() - t0
        return self.proc.returncode, time.monotonic() - t0

    def texts(self) -> tuple[str, str]:
        self.out.flush()
        self.err.flush()
        return (self.work / "front.out").read_text(), (self.work / "front.err").read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.out.close()
        self.err.close()


def rows_of(run: Path) -> list[dict[str, Any]]:
    path = run / "rows.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            if line.strip():
                out.append(json.loads(line))
    return out


def run_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name != "multirun")


def wait_for_rows(root: Path, n: int, front: Front, limit: float = 180) -> Path:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        for run in run_dirs(root):
            if sum(r.get("status") == "ok" for r in rows_of(run)) >= n:
                return run
        if front.proc.poll() is not None:
            out, err = front.texts()
            raise RuntimeError(f"the run ended before {n} rows: {err.strip() or out.strip()}")
        time.sleep(0.05)
    raise RuntimeError(f"no {n} rows within {limit} s")


def heartbeats(run: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for f in (run / ".heartbeat").glob("rank-*"):
        with contextlib.suppress(OSError, ValueError):
            index, at, pid, host, _allow, label = f.read_text().rstrip("\n").split("\t", 5)
            out[int(f.name.split("-", 1)[1])] = {
                "index": int(index),
                "pid": int(pid),
                "host": host,
                "label": label,
                "at": float(at),
            }
    return out


def user_message(out: str, err: str) -> str:
    """The line a user reads first: gpulane's error line, else the last line shown."""
    # a log's progress lines (stderr is a file here) are not what the user reads first
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("# progress:")]
    for ln in lines:
        if ln.startswith("gpulane: error:"):
            return ln
    tail = lines or [ln.strip() for ln in out.splitlines() if ln.strip()]
    return tail[-1] if tail else ""


def parquet_rows(run: Path) -> int | None:
    path = run / "rows.parquet"
    if not path.exists():
        return None
    import pyarrow.parquet as pq

    return int(pq.read_metadata(path).num_rows)


def settle(outcome: Outcome, front: Front, run: Path | None, before: list[dict[str, Any]]) -> None:
    """Fill in what the run left on disk and what the user saw."""
    out, err = front.texts()
    outcome.message = user_message(out, err)
    if run is None:
        runs = run_dirs(Path(front.work / "results"))
        run = runs[0] if runs else None
    outcome.rows_before = sum(r.get("status") == "ok" for r in before)
    if run is None:
        outcome.rows_after = 0
        outcome.rows_lost = 0
        return
    outcome.run = str(run)
    after = rows_of(run)
    ok_after = [r for r in after if r.get("status") == "ok"]
    outcome.rows_after = len(ok_after)
    outcome.rows_lost = sum(1 for r in before if r.get("status") == "ok" and r not in ok_after)
    outcome.error_row = any(r.get("status") == "error" for r in after)
    errors = [i for i, r in enumerate(after) if r.get("status") == "error"]
    if errors and errors[0] < len(after) - 1:
        late = len(after) - 1 - errors[0]
        outcome.notes.append(
            f"{late} rows were appended after the error row (ranks outlived the front)"
        )
    raw = (run / "rows.jsonl").read_bytes() if (run / "rows.jsonl").exists() else b""
    if raw and not raw.endswith(b"\n"):
        cut = len(raw) - raw.rfind(b"\n") - 1
        outcome.notes.append(f"rows.jsonl ends in a cut-off line of {cut} bytes (skipped on read)")
    n = parquet_rows(run)
    outcome.parquet = n is not None and n == len(after)
    if n is not None and n != len(after):
        outcome.notes.append(f"rows.parquet has {n} rows, rows.jsonl {len(after)}")


@contextlib.contextmanager
def workdir(name: str, keep: bool) -> Iterator[Path]:
    slug = "".join(ch if ch.isalnum() else "-" for ch in name).strip("-")
    d = Path(tempfile.mkdtemp(prefix=f"gpulane-rel-{slug}-"))
    try:
        yield d
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def tmpfs(path: Path, size: str, readonly: bool = False) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if readonly else "")
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True
    )
    if res.returncode != 0:
        raise PermissionError(f"mount -t tmpfs not permitted here: {res.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def kill_quietly(pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


# --------------------------------------------------------------- mid-run fault scenarios


def fault_run(
    outcome: Outcome,
    args: list[str],
    inject: Callable[[Front, Path], Callable[[], None] | None],
    keep: bool,
    rows_first: int = 2,
    limit: float = 180,
    mount: str | None = None,
) -> Outcome:
    """Start the run, wait for ``rows_first`` rows, inject the fault, time the exit."""
    with workdir(outcome.scenario, keep) as work:
        results = work / "results"
        ctx = tmpfs(results, mount) if mount else contextlib.nullcontext(results)
        with ctx:
            front = Front([*args, f"results_dir={results}"], work)
            cleanup = None
            try:
                run = wait_for_rows(results, rows_first, front)
                before = rows_of(run)
                t0 = time.monotonic()
                cleanup = inject(front, run)
                code, _ = front.wait(limit)
                outcome.detect_s = round(time.monotonic() - t0, 2)
                outcome.status = code
                if code is None:
                    outcome.notes.append(f"front still running after {limit:.0f} s: killed")
                if cleanup is not None:
                    cleanup()
                    cleanup = None
                settle(outcome, front, run, before)
                if outcome.launcher == "slurm":
                    outcome.notes.append(slurm_job_state(run))
            except Exception as err:
                outcome.notes.append(f"not completed: {err}")
            finally:
                if cleanup is not None:
                    cleanup()
                front.close()
    return outcome


def signal_rank(sig: signal.Signals, rank: int = 1) -> Callable[[Front, Path], Callable[[], None]]:
    def inject(front: Front, run: Path) -> Callable[[], None]:
        pid = heartbeats(run)[rank]["pid"]
        os.kill(pid, sig)
        # A stopped rank is ended by the watchdog; kill it in any case afterwards.
        return lambda: kill_quietly(pid)

    return inject


def signal_front(sig: signal.Signals, group: bool = False) -> Callable[[Front, Path], None]:
    def inject(front: Front, run: Path) -> None:
        if group:
            os.killpg(front.proc.pid, sig)  # what a terminal's Ctrl-C does
        else:
            front.proc.send_signal(sig)

    return inject


def oom_rank(rank: int = 1) -> Callable[[Front, Path], Callable[[], None]]:
    """Cap the rank's address space at what it uses now (prlimit RLIMIT_AS): its next
    buffer allocation fails, as it does when a rank runs out of memory."""

    def inject(front: Front, run: Path) -> Callable[[], None]:
        pid = heartbeats(run)[rank]["pid"]
        vm = 0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                vm = int(line.split()[1]) * 1024
        resource.prlimit(pid, resource.RLIMIT_AS, (vm + (1 << 20), vm + (1 << 20)))
        return lambda: kill_quietly(pid)

    return inject


def fill_disk(front: Front, run: Path) -> None:
    """Another process fills the results filesystem mid-run (``dd`` until ENOSPC)."""
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={run.parent / 'filler'}", "bs=64k"],
        capture_output=True,
    )


def slurm_job_state(run: Path) -> str:
    try:
        job = json.loads((run / "slurm.json").read_text())["job_id"]
    except (OSError, ValueError, KeyError):
        return "no slurm.json"
    for _ in range(20):
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"], capture_output=True, text=True
        ).stdout.split()
        queued = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True
        ).stdout.split()
        if out and not queued:
            return f"job {job}: {out[0]} (left the queue)"
        time.sleep(0.5)
    return f"job {job}: sacct {out[:1]}, squeue {queued[:1]}"


def scancel(front: Front, run: Path) -> None:
    job = json.loads((run / "slurm.json").read_text())["job_id"]
    subprocess.run(["scancel", job], check=True)


# ------------------------------------------------------------------- start-up scenarios


def startup_run(outcome: Outcome, args: list[str], work: Path, limit: float = 120) -> Outcome:
    front = Front(args, work)
    t0 = time.monotonic()
    try:
        code, _ = front.wait(limit)
        outcome.status = code
        outcome.detect_s = round(time.monotonic() - t0, 2)
        settle(outcome, front, None, [])
        outcome.notes.append("time from start (the fault is there before the run)")
        if outcome.launcher == "slurm" and outcome.run:
            outcome.notes.append(slurm_job_state(Path(outcome.run)))
    finally:
        front.close()
    return outcome


def unwritable(keep: bool) -> Outcome:
    o = Outcome("unwritable results_dir", "local", "results_dir on a read-only tmpfs", 2, 30)
    with workdir("ro", keep) as work:
        try:
            with tmpfs(work / "results", "64k", readonly=True) as ro:
                return startup_run(o, [*SWEEP, f"results_dir={ro}"], work)
        except PermissionError as err:
            o.notes.append(f"not run: {err}")
            return o


def disk_full_at_start(keep: bool) -> Outcome:
    o = Outcome("full disk (at start)", "local", "results_dir on a full 256 KiB tmpfs", 2, 30)
    with workdir("full", keep) as work:
        try:
            with tmpfs(work / "results", "256k") as d:
                subprocess.run(["dd", "if=/dev/zero", f"of={d / 'filler'}"], capture_output=True)
                return startup_run(o, [*SWEEP, f"results_dir={d}"], work)
        except PermissionError as err:
            o.notes.append(f"not run: {err}")
            return o


def missing_gpu(keep: bool) -> Outcome:
    o = Outcome("missing GPU", "local", "device=cuda on a machine with no GPU", 2, 30)
    with workdir("gpu", keep) as work:
        return startup_run(o, [*SWEEP, "device=cuda", f"results_dir={work / 'results'}"], work)


def missing_gpu_slurm(keep: bool) -> Outcome:
    o = Outcome(
        "missing GPU", "slurm", "device=cuda, tasks on a node with no GPU", 1, 120
    )  # the job starts; its ranks find no GPU
    with workdir("gpu-slurm", keep) as work:
        return startup_run(
            o, [*SWEEP, *SLURM, "device=cuda", f"results_dir={work / 'results'}"], work, 300
        )


# ----------------------------------------------------------------------------- registry


def no_fault(front: Front, run: Path) -> None:
    """The fault is in the configuration (skip_rank): it strikes at the third point."""


def scenarios(keep: bool) -> dict[str, Callable[[], Outcome]]:
    t_kill, t_hang = 30, 5
    local = [*SWEEP, f"timeout_s={t_kill}"]
    hang = [*SWEEP, f"timeout_s={t_hang}"]
    gpu = [*GPU_SWEEP, f"timeout_s={t_kill}"]
    # Small points and few iterations: the watchdog's per-point allowance (timeout_s plus
    # what the point's bytes need) stays near timeout_s, as in the CPU hang scenarios.
    gpu_hang = [*GPU_SWEEP, "sizes.min=1M", "sizes.max=64M", "iters=20", f"timeout_s={t_hang}"]
    slurm = [*SWEEP, *SLURM, f"timeout_s={t_kill}"]
    slurm_hang = [*SWEEP, *SLURM, f"timeout_s={t_hang}"]

    def o(
        name: str, launcher: str, fault: str, status: int, bound: float | None, parquet: bool = True
    ) -> Outcome:
        return Outcome(name, launcher, fault, status, bound, expect_parquet=parquet)

    return {
        "local-sigkill": lambda: fault_run(
            o("rank SIGKILL", "local", "kill -9 rank 1", 1, 2 * t_kill),
            local,
            signal_rank(signal.SIGKILL),
            keep,
        ),
        "local-hang": lambda: fault_run(
            o(
                "rank hang past timeout_s",
                "local",
                f"kill -STOP rank 1, timeout_s={t_hang}",
                1,
                2 * t_hang + 2,
            ),
            hang,
            signal_rank(signal.SIGSTOP),
            keep,
        ),
        "local-skip": lambda: fault_run(
            o(
                "rank skips a collective",
                "local",
                f"skip_rank=1 (gloo), timeout_s={t_hang}",
                1,
                2 * t_hang + 2,
            ),
            [*hang, "skip_rank=1"],
            no_fault,
            keep,
        ),
        "gpu-sigkill": lambda: fault_run(
            o("rank SIGKILL mid-all_reduce (GPU, NCCL)", "local", "kill -9 rank 1", 1, 2 * t_kill),
            gpu,
            signal_rank(signal.SIGKILL),
            keep,
        ),
        "gpu-nccl-hang": lambda: fault_run(
            o(
                "NCCL hang: a rank skips a collective (GPU)",
                "local",
                f"skip_rank=1 (NCCL), timeout_s={t_hang}",
                1,
                2 * t_hang + 2,
            ),
            [*gpu_hang, "skip_rank=1"],
            no_fault,
            keep,
        ),
        "local-segv": lambda: fault_run(
            o("rank crashes (SIGSEGV)", "local", "kill -SEGV rank 1", 1, 2 * t_kill),
            local,
            signal_rank(signal.SIGSEGV),
            keep,
        ),
        "local-oom": lambda: fault_run(
            o(
                "rank raises (out of memory)",
                "local",
                "prlimit RLIMIT_AS of rank 1 to its current size + 1 MiB",
                1,
                2 * t_kill,
            ),
            local,
            oom_rank(),
            keep,
        ),
        "local-sigint": lambda: fault_run(
            o("SIGINT to the front", "local", "kill -INT front", 130, 30),
            local,
            signal_front(signal.SIGINT),
            keep,
        ),
        "local-ctrl-c": lambda: fault_run(
            o("Ctrl-C (process group)", "local", "kill -INT -PGID (front and ranks)", 130, 30),
            local,
            signal_front(signal.SIGINT, group=True),
            keep,
        ),
        "local-sigterm": lambda: fault_run(
            o("SIGTERM to the front", "local", "kill -TERM front", 143, 30),
            local,
            signal_front(signal.SIGTERM),
            keep,
        ),
        "local-disk-fills": lambda: fault_run(
            o(
                "disk fills mid-run",
                "local",
                "dd fills the 16 MiB tmpfs of results_dir",
                1,
                2 * t_kill,
                parquet=False,
            ),
            local,
            fill_disk,
            keep,
            mount="16m",
        ),
        "local-unwritable": lambda: unwritable(keep),
        "local-disk-full": lambda: disk_full_at_start(keep),
        "local-no-gpu": lambda: missing_gpu(keep),
        "slurm-scancel": lambda: fault_run(
            o("scancel mid-run", "slurm", "scancel JOBID", 1, 2 * t_kill),
            slurm,
            scancel,
            keep,
        ),
        "slurm-sigterm": lambda: fault_run(
            o(
                "SIGTERM to the front",
                "slurm",
                "kill -TERM front (job must be cancelled)",
                143,
                30,
            ),
            slurm,
            signal_front(signal.SIGTERM),
            keep,
        ),
        "slurm-sigint": lambda: fault_run(
            o(
                "SIGINT to the front",
                "slurm",
                "kill -INT front (job must be cancelled)",
                130,
                30,
            ),
            slurm,
            signal_front(signal.SIGINT),
            keep,
        ),
        "slurm-sigkill": lambda: fault_run(
            o(
                "task SIGKILL",
                "slurm",
                "kill -9 task 1 (pid from its heartbeat)",
                1,
                2 * t_kill,
            ),
            slurm,
            signal_rank(signal.SIGKILL),
            keep,
        ),
        "slurm-hang": lambda: fault_run(
            o(
                "task hang past timeout_s",
                "slurm",
                f"kill -STOP task 1, timeout_s={t_hang}",
                1,
                2 * t_hang + 2,
            ),
            slurm_hang,
            signal_rank(signal.SIGSTOP),
            keep,
        ),
        "slurm-no-gpu": lambda: missing_gpu_slurm(keep),
    }


# ------------------------------------------------------------------------------ output


def markdown(outcomes: list[Outcome]) -> str:
    head = (
        "| scenario | launcher | fault injected | detected in (s) | bound (s) | rows before → "
        "after (lost) | error row | parquet | exit (expected) | message the user saw | pass |"
    )
    lines = [head, "|" + "---|" * 11]
    for o in outcomes:
        if o.status is None and o.detect_s is None:
            lines.append(
                f"| {o.scenario} | {o.launcher} | {o.fault} | not run | | | | | | "
                f"{'; '.join(o.notes)} | – |"
            )
            continue
        msg = o.message.replace("|", "\\|")
        if len(msg) > 260:
            msg = msg[:257] + "..."
        yes = lambda v: "–" if v is None else ("yes" if v else "**no**")  # noqa: E731
        lines.append(
            f"| {o.scenario} | {o.launcher} | {o.fault} | {o.detect_s} | {o.bound_s or ''} | "
            f"{o.rows_before} → {o.rows_after} ({o.rows_lost}) | {yes(o.error_row)} | "
            f"{yes(o.parquet)} | {o.status} ({o.expected_status}) | `{msg}` | "
            f"{'yes' if o.passed else '**no**'} |"
        )
    notes = [f"- {o.scenario} ({o.launcher}): {'; '.join(o.notes)}" for o in outcomes if o.notes]
    return "\n".join(lines) + ("\n\nNotes:\n" + "\n".join(notes) if notes else "") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--gpu", action="store_true", help="the GPU variants (gpu-*) only")
    parser.add_argument("--keep", action="store_true", help="keep the work directories")
    parser.add_argument("--json", type=Path, help="write the outcomes as JSON here")
    parser.add_argument("--md", type=Path, help="write the Markdown table here")
    args = parser.parse_args()
    table = scenarios(args.keep)
    if args.list:
        print("\n".join(table))
        return 0
    # gpu-* need 2 GPUs: run with --gpu (or --only); the default list is the CPU one.
    default = [n for n in table if n.startswith("gpu-") == args.gpu]
    names = [n for n in args.only.split(",") if n] or default
    unknown = [n for n in names if n not in table]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; --list shows them")
    outcomes = []
    for name in names:
        t = time.monotonic()
        o = table[name]()
        outcomes.append(o)
        print(
            f"{name}: status {o.status} (expected {o.expected_status}), detected in "
            f"{o.detect_s} s, rows {o.rows_before} -> {o.rows_after} (lost {o.rows_lost}), "
            f"{'PASS' if o.passed else 'FAIL'} [{time.monotonic() - t:.0f} s]\n  {o.message}"
            + "".join(f"\n  note: {n}" for n in o.notes),
            flush=True,
        )
    machine = f"{platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}"
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine,
                    "date": stamp,
                    "outcomes": [{**asdict(o), "passed": o.passed} for o in outcomes],
                },
                indent=1,
            )
        )
    if args.md:
        args.md.write_text(f"Run {stamp} on {machine}.\n\n" + markdown(outcomes))
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
