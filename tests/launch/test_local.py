"""The local launcher's watchdog with real rank processes: a killed rank, a hung rank."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpulane.rundir import read_heartbeats
from tests.helpers import SLOW_SWEEP, local_job_config, rows_of, run_dirs


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    return subprocess.Popen(
        [sys.executable, "-m", "gpulane", *SLOW_SWEEP, f"results_dir={tmp_path}", *extra],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_rows(tmp_path: Path, n: int, limit: float = 120) -> Path:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        runs = run_dirs(tmp_path) if tmp_path.exists() else []
        if runs and (runs[0] / "rows.jsonl").exists() and len(rows_of(runs[0])) >= n:
            return runs[0]
        time.sleep(0.1)
    raise AssertionError(f"no {n} rows within {limit} s")


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_killed_rank_ends_the_run_and_keeps_rows(tmp_path: Path, start: str) -> None:
    proc = _start(tmp_path, "timeout_s=30", f"launcher.start={start}")
    run = _wait_for_rows(tmp_path, 2)
    victim = read_heartbeats(run)[1]
    os.kill(victim.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    _, err = proc.communicate(timeout=120)
    detected_in = time.monotonic() - killed_at
    assert proc.returncode == 1
    assert f"rank 1 (pid {victim.pid}) was killed by SIGKILL" in err
    assert "Traceback" not in err
    assert detected_in < 30  # well within the watchdog timeout: death is seen directly
    rows = rows_of(run)
    measured = [r for r in rows if r["status"] == "ok"]
    errors = [r for r in rows if r["status"] == "error"]
    assert len(measured) >= 2
    assert len(errors) == 1 and "SIGKILL" in errors[0]["error"]
    assert errors[0]["op"] == "all_reduce"
    assert (run / "rows.parquet").exists()


def test_hung_rank_is_named_within_the_timeout(tmp_path: Path) -> None:
    """A stopped rank (SIGSTOP) under gloo: named, not its waiting peer, and within
    timeout_s (issue 19: 24.9 s for timeout_s=20). Its alive beat stops with it, so it is
    named once beat and progress have both stopped for half the timeout."""
    proc = _start(tmp_path, "timeout_s=20")
    run = _wait_for_rows(tmp_path, 2)
    victim = read_heartbeats(run)[1]
    os.kill(victim.pid, signal.SIGSTOP)  # a hang: alive, silent
    stopped_at = time.monotonic()
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim.pid, signal.SIGKILL)
    detected_in = time.monotonic() - stopped_at
    assert proc.returncode == 1
    assert re.search(r"no progress for \d+ s in all_reduce", err), err
    assert f"rank 1 on {victim.host} (pid {victim.pid}) stopped responding" in err
    assert "rank 0" not in err  # the peer that waits for it is not blamed
    assert detected_in < 20, detected_in
    rows = rows_of(run)
    assert any(r["status"] == "error" and "stopped responding" in r["error"] for r in rows)
    assert sum(r["status"] == "ok" for r in rows) >= 2


def stopping_job(cfg: Any, ctx: Any) -> None:
    """Rank 1 stops itself; rank 0 goes on beating, then fails as gloo does when its peer
    never answers (its own timeout, before gpulane's watchdog would end the run)."""
    ctx.heartbeat(0, "all_reduce 8 B float in-place")
    if ctx.rank == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
    for i in range(1, 9):
        time.sleep(1)
        ctx.heartbeat(i, f"point {i}")
    raise RuntimeError("[gloo] Timed out waiting 8000ms for recv operation to complete")


def test_a_peer_failing_on_a_stopped_rank_blames_the_stopped_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpulane.rundir import make_run_dir, save_config
    from gpulane.session.sweep import launch_job

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    cfg = local_job_config(tmp_path, timeout_s=10)
    run = make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=2)
    started = time.monotonic()
    status = launch_job(saved, run, {}, "tests.launch.test_local:stopping_job", 2, "cpu")
    took = time.monotonic() - started
    err = capsys.readouterr().err
    beats = read_heartbeats(run.path)
    assert status == 1
    assert f"rank 1 on {beats[1].host} (pid {beats[1].pid}) stopped responding in " in err
    assert "(its alive beat stopped); rank 0 " in err
    assert "Timed out waiting" in err
    assert took < 60
    assert (
        not Path(f"/proc/{beats[1].pid}/status").exists()
        or "zombie" in Path(f"/proc/{beats[1].pid}/status").read_text().lower()
    )


def test_sigterm_to_the_front_keeps_rows_and_exits_143(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    run = _wait_for_rows(tmp_path, 2)
    proc.send_signal(signal.SIGTERM)
    _, _err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    rows = rows_of(run)
    assert sum(r["status"] == "ok" for r in rows) >= 2
    assert rows[-1]["status"] == "error" and "SIGTERM" in rows[-1]["error"]
    assert (run / "rows.parquet").exists()
    # no rank is left behind
    beats = read_heartbeats(run)
    for b in beats.values():
        assert (
            not Path(f"/proc/{b.pid}").exists()
            or "zombie" in Path(f"/proc/{b.pid}/status").read_text().lower()
        )


def test_resume_measures_only_what_is_missing(tmp_path: Path) -> None:
    proc = _start(tmp_path, "timeout_s=30")
    run = _wait_for_rows(tmp_path, 3)
    os.kill(read_heartbeats(run)[1].pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    before = [r for r in rows_of(run) if r["status"] == "ok"]
    out = subprocess.run(
        [sys.executable, "-m", "gpulane", "sweep", f"resume={run}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    ok = [r for r in rows_of(run) if r["status"] == "ok"]
    sizes = [r["size_bytes"] for r in ok]
    # every size of the sweep once: the earlier rows kept, the rest added
    assert sorted(sizes) == [1024 << i for i in range(11)]
    assert ok[: len(before)] == before
    assert (run / "rows.parquet").exists()


def test_two_runs_into_one_store_do_not_interfere(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "gpulane",
        "sweep",
        "ranks=2",
        "device=cpu",
        "sizes.min=1K",
        "sizes.max=8K",
        "iters=3",
        f"results_dir={tmp_path}",
    ]
    procs = [
        subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    for p in procs:
        p.communicate(timeout=300)
        assert p.returncode == 0
    runs = run_dirs(tmp_path)
    assert len(runs) == 2
    for run in runs:
        rows = rows_of(run)
        assert len(rows) == 4 and len({r["run_id"] for r in rows}) == 1


def test_rank_that_skips_a_collective_hangs_its_peer_and_is_caught(tmp_path: Path) -> None:
    """skip_rank=1: rank 1 leaves out one collective at the third point; rank 0 waits in
    gloo for it. The watchdog must end the run within its bound and keep the 2 rows."""
    started = time.monotonic()
    proc = _start(tmp_path, "timeout_s=5", "skip_rank=1", "iters=5")
    _, err = proc.communicate(timeout=120)
    took = time.monotonic() - started
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    run = run_dirs(tmp_path)[0]
    rows = rows_of(run)
    assert sum(r["status"] == "ok" for r in rows) == 2
    errors = [r for r in rows if r["status"] == "error"]
    assert len(errors) == 1
    assert "all_reduce 4 KiB" in errors[0]["error"]  # the third point: 1K, 2K, 4K
    assert "gpulane: error:" in err
    assert took < 60


def affinity_job(cfg: Any, ctx: Any) -> None:
    """Each rank writes the CPUs it may run on, after starting a thread of its own (which
    inherits them)."""
    import threading

    seen: list[set[int]] = []
    t = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
    t.start()
    t.join()
    cpus = sorted(os.sched_getaffinity(0) | seen[0])
    (Path(ctx.run_dir) / f"cpus-{ctx.rank}").write_text(",".join(map(str, cpus)))
    if ctx.is_leader:  # one row: the run measured something
        from gpulane.record import Row, RowWriter

        with RowWriter(ctx.run_dir) as writer:
            writer.write(
                Row(
                    run_id="affinity",
                    kind="collective",
                    backend="test",
                    op="all_reduce",
                    time_us=1.0,
                )
            )


@pytest.mark.parametrize("start", ["fork", "exec"])
@pytest.mark.parametrize("bind", ["core", "none"])
def test_bind_core_puts_each_rank_on_a_core_of_its_own(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    bind: str,
    start: str,
) -> None:
    from gpulane.rundir import make_run_dir, save_config
    from gpulane.session.sweep import launch_job

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    cfg = local_job_config(tmp_path)
    cfg.launcher.bind = bind
    cfg.launcher.start = start
    run = make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=2)
    assert launch_job(saved, run, {}, "tests.launch.test_local:affinity_job", 2, "cpu") == 0
    mine = sorted(os.sched_getaffinity(0))
    got = [(run.path / f"cpus-{r}").read_text() for r in range(2)]
    if bind == "core":
        assert got == [str(mine[0]), str(mine[1 % len(mine)])]
        assert "2 local processes, each bound to a core of its own" in capsys.readouterr().out
    else:
        assert got == [",".join(map(str, mine))] * 2


def test_an_unknown_bind_is_bad_input(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "gpulane", "sweep", "launcher.bind=socket",
         f"results_dir={tmp_path}", "progress=false"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "gpulane: error: launcher.bind: expected none or core, got 'socket'"
    ]
    assert not list(tmp_path.iterdir())
