"""Reliability scenarios not covered in test_local.py, with real processes and real faults:
Ctrl-C (to the front alone and to the whole process group, as a terminal sends it), a rank
that crashes (SIGSEGV), a rank that raises (its memory capped with prlimit), a full disk
before the run and a disk that fills mid-run (tmpfs mounts: these tests need root, as CI
runs them; they fail, not skip, without it).

Each asserts how fast the fault was acted on, the exit status, the error text, and that
the rows finished before the fault are still on disk."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpulane.record import Row, RowWriter, read_rows
from gpulane.rundir import MIN_FREE_BYTES, read_heartbeats
from tests.helpers import SLOW_SWEEP, run_dirs

SWEEP = [*SLOW_SWEEP, "timeout_s=30"]


class Front:
    """``gpulane sweep`` as a user starts it, in its own process group (its ranks too)."""

    def __init__(self, results: Path, *extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpulane", *SWEEP, f"results_dir={results}", *extra],
            cwd=results.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # SIGINT as a terminal's shell leaves it: a caller started in the background
            # (`(ci &)`) passes it on ignored, and the front would never see its Ctrl-C.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.results = results

    def rows(self, n: int, limit: float = 120) -> tuple[Path, list[dict[str, Any]]]:
        """Wait for ``n`` good rows; (run directory, the good rows on disk now)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            for run in run_dirs(self.results) if self.results.is_dir() else []:
                if (run / "rows.jsonl").exists():
                    ok = [r.to_dict() for r in read_rows(run / "rows.jsonl") if r.status == "ok"]
                    if len(ok) >= n:
                        return run, ok
            assert self.proc.poll() is None, self.proc.communicate()
            time.sleep(0.05)
        raise AssertionError(f"no {n} rows within {limit} s")

    def finish(self, since: float, limit: float = 120) -> tuple[int, str, str, float]:
        try:
            out, err = self.proc.communicate(timeout=limit)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.communicate()
        return self.proc.returncode, out, err, time.monotonic() - since


def assert_kept(run: Path, before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row finished before the fault is still on disk, unchanged."""
    after = rows_of_lenient(run)
    ok = [r for r in after if r["status"] == "ok"]
    assert ok[: len(before)] == before
    return after


def rows_of_lenient(run: Path) -> list[dict[str, Any]]:
    return [x.to_dict() for x in read_rows(run / "rows.jsonl")]


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        pytest.fail(f"mount -t tmpfs failed (these tests need root): {res.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.mark.parametrize("group", [False, True], ids=["front-only", "process-group"])
def test_ctrl_c_keeps_rows_and_exits_130(tmp_path: Path, group: bool) -> None:
    # 1000 iterations a size: seconds of work left after the second row, even when this
    # process is slow to see that row (a loaded CI run once finished the whole 100-iteration
    # sweep before the signal came, and exited 0).
    front = Front(tmp_path / "results", "iters=1000")
    run, before = front.rows(2)
    assert front.proc.poll() is None, "the sweep ended before the signal"
    if group:  # a terminal's Ctrl-C reaches the front and its ranks alike
        os.killpg(front.proc.pid, signal.SIGINT)
    else:
        front.proc.send_signal(signal.SIGINT)
    status, out, err, took = front.finish(time.monotonic())
    assert status == 130, err
    assert took < 10
    assert f"# interrupted: rows so far kept in {run}" in out
    assert "Traceback" not in err
    rows = assert_kept(run, before)
    assert rows[-1]["status"] == "error" and rows[-1]["error"] == "interrupted"
    assert (run / "rows.parquet").exists()
    for beat in read_heartbeats(run).values():  # no rank left behind
        stat = Path(f"/proc/{beat.pid}/stat")
        assert not stat.exists() or stat.read_text().split(") ")[1].startswith("Z")


def test_rank_crash_sigsegv_is_named(tmp_path: Path) -> None:
    front = Front(tmp_path / "results")
    run, before = front.rows(2)
    victim = read_heartbeats(run)[1]
    os.kill(victim.pid, signal.SIGSEGV)
    status, _, err, took = front.finish(time.monotonic())
    assert status == 1
    assert f"rank 1 (pid {victim.pid}) was killed by SIGSEGV during all_reduce" in err
    assert took < 2 * 30  # twice the watchdog timeout; death is seen directly (~2 s)
    rows = assert_kept(run, before)
    assert rows[-1]["status"] == "error" and "SIGSEGV" in rows[-1]["error"]
    assert (run / "rows.parquet").exists()


def test_rank_that_raises_out_of_memory(tmp_path: Path) -> None:
    """Rank 1's address space is capped at what it uses now: its next buffer allocation
    fails inside torch, and the rank raises."""
    front = Front(tmp_path / "results")
    run, before = front.rows(2)
    victim = read_heartbeats(run)[1]
    vm = next(
        int(line.split()[1]) * 1024
        for line in Path(f"/proc/{victim.pid}/status").read_text().splitlines()
        if line.startswith("VmSize:")
    )
    resource.prlimit(victim.pid, resource.RLIMIT_AS, (vm + (1 << 20), vm + (1 << 20)))
    status, _, err, took = front.finish(time.monotonic())
    assert status == 1
    # Mostly torch's allocator raises (exit 1); an allocation failing in a C++ thread
    # first ends the rank with SIGABRT (std::bad_alloc) instead.
    assert f"rank 1 (pid {victim.pid}) " in err, err
    oom = ("can't allocate memory", "MemoryError", "bad_alloc", "SIGABRT")
    assert any(word in err for word in oom), err
    assert took < 2 * 30
    rows = assert_kept(run, before)
    assert rows[-1]["status"] == "error" and f"rank 1 (pid {victim.pid}) " in rows[-1]["error"]
    assert (run / "rows.parquet").exists()


def test_full_disk_is_found_before_the_run(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "results", "256k") as results:
        subprocess.run(["dd", "if=/dev/zero", f"of={results / 'filler'}"], capture_output=True)
        front = Front(results)
        status, _, err, took = front.finish(time.monotonic())
        assert status == 2
        assert f"results_dir: the filesystem of {results} is full (0 KiB free" in err
        assert "Traceback" not in err
        assert took < 30
        assert run_dirs(results) == []  # nothing left behind


def test_disk_that_fills_mid_run(tmp_path: Path) -> None:
    size = MIN_FREE_BYTES + (8 << 20)
    with tmpfs(tmp_path / "results", f"{size >> 10}k") as results:
        front = Front(results)
        run, before = front.rows(2)
        filler = results / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        status, _, err, took = front.finish(time.monotonic())
        assert status == 1
        # Whichever rank writes first on the full disk fails: rank 0 its row, any rank
        # its heartbeat.
        assert "gpulane: error: rank 0 " in err or "gpulane: error: rank 1 " in err, err
        assert f"the filesystem of {run} is full" in err
        assert "Traceback" not in err
        assert took < 2 * 30
        kept = assert_kept(run, before)
        # The error row either could not be written (said so) or found room: a heartbeat
        # rewritten after the disk filled frees its old block (a CI run of 2026-11-27 wrote
        # the row). Never both, never neither.
        wrote = any(r["status"] == "error" for r in kept)
        said = "gpulane: warning: could not write the error row" in err
        assert wrote != said, (wrote, err)
        # Space again: a later writer (resume=) ends any cut-off line and loses nothing.
        filler.unlink()
        before = rows_of_lenient(run)
        with RowWriter(run) as w:
            w.write(Row(run_id="x", kind="collective", backend="test", op="probe"))
        after = rows_of_lenient(run)
        assert after[:-1] == before and after[-1]["op"] == "probe"
