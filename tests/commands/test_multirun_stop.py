"""Ctrl-C as a terminal sends it (SIGINT to the whole process group) stops a multirun at
once: exit 130, the stopped run named, its partial rows left out of the comparison, the
runs after it never started; a Ctrl-C while the ranks start is one line, no traceback.

Real processes: ``python -m gpulane sweep`` in its own process group, gloo on 2 CPU
ranks; the signal is sent when a file shows the moment wanted (a row of the third run,
the plan of a run whose ranks are still starting), never after a blind sleep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpulane.record import read_rows
from tests.helpers import run_dirs

TINY = ["ranks=2", "device=cpu", "sizes.min=8", "warmup=1", "progress=false", "timeout_s=60"]


def start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [sys.executable, "-m", "gpulane", "sweep", *args, f"results_dir={tmp_path / 'runs'}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # SIGINT as a terminal's shell leaves it (a background caller passes it ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for(proc: subprocess.Popen[str], ready: Callable[[], bool], limit: float) -> None:
    deadline = time.monotonic() + limit
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the moment to stop never came"
        time.sleep(0.02)


def ctrl_c(proc: subprocess.Popen[str], limit: float = 120) -> tuple[int, str, str, float]:
    os.killpg(proc.pid, signal.SIGINT)
    since = time.monotonic()
    try:
        out, err = proc.communicate(timeout=limit)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc.returncode, out, err, time.monotonic() - since


def good_rows(run: Path) -> int:
    path = run / "rows.jsonl"
    return sum(r.status == "ok" for r in read_rows(path)) if path.is_file() else 0


def test_ctrl_c_during_a_run_stops_the_multirun(tmp_path: Path) -> None:
    results = tmp_path / "runs"
    # 300 iterations a size: seconds left in c after its second row, even on a loaded host
    proc = start(tmp_path, "-m", "build=a,b,c,d", *TINY, "sizes.max=256K", "iters=300")

    def third_run_measuring() -> bool:
        runs = run_dirs(results) if results.is_dir() else []
        return len(runs) >= 3 and good_rows(runs[2]) >= 2

    wait_for(proc, third_run_measuring, limit=540)
    status, out, err, took = ctrl_c(proc)
    assert status == 130, out[-2000:] + err
    assert took < 60  # the comparison of a and b, no fourth run
    assert "Traceback" not in err
    a, b, c = run_dirs(results)  # d never started
    assert [p.name.split("-")[2] for p in (a, b, c)] == ["a", "b", "c"]
    rows = [x.to_dict() for x in read_rows(c / "rows.jsonl")]
    assert rows[-1]["status"] == "error" and rows[-1]["error"] == "interrupted"
    assert good_rows(c) < 2 * 16  # partial: 16 sizes, in and out of place
    assert f"# interrupted: rows so far kept in {c} (a partial run)" in out
    assert f"# multirun: left out, stopped before its end: {c.name}" in out
    tail = out[out.index("# multirun: 2 runs compared") :]
    assert "Compare: a vs b" in tail and " c " not in tail.splitlines()[2]
    assert c.name not in tail
    (page,) = (results / "multirun").glob("*/compare.html")
    assert c.name not in page.read_text(encoding="utf-8")
    line = (
        f"gpulane: interrupted: multirun stopped at run 3 of 4 (build=c, {c.name}): "
        "partial, left out of the comparison; not started: build=d"
    )
    assert line in err.splitlines(), err


@pytest.mark.parametrize("delay", [0.0, 0.7], ids=["at-plan", "later"])
def test_ctrl_c_while_the_ranks_start_is_one_line(tmp_path: Path, delay: float) -> None:
    """The plan is saved just before the fork server is started: from then until the
    first heartbeat, the server imports torch (seconds); its SIGINT must print nothing."""
    results = tmp_path / "runs"
    proc = start(tmp_path, *TINY, "sizes.max=64", "iters=2")

    def planned() -> bool:
        runs = run_dirs(results) if results.is_dir() else []
        return bool(runs) and (runs[0] / "sweep-plan.json").is_file()

    wait_for(proc, planned, limit=300)
    time.sleep(delay)
    (run,) = run_dirs(results)
    measuring = good_rows(run) > 0
    status, out, err, _ = ctrl_c(proc)
    assert not measuring, "the ranks measured before the signal: no start-up left to test"
    assert status == 130, out + err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    said = [ln for ln in (out + err).splitlines() if "interrupted" in ln]
    assert said in (
        ["# interrupted during start-up; nothing measured"],
        ["gpulane: error: interrupted"],  # before the session began
    ), out + err
    assert not [ln for ln in err.splitlines() if not ln.startswith("gpulane: ")], err
