"""Ranks forked from the server that imported torch (``launcher.start=fork``, the default)
are what new processes (``start=exec``) would be: the same real 2-rank job, run both ways,
sees the same environment (the one of this launch, not of the server's start), working
directory and stdin, writes the same lines to its logs, and fails with the same words."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from gpulane.launch.forked import ForkedRank, start_rank
from gpulane.rundir import make_run_dir, save_config
from gpulane.session.sweep import launch_job
from tests.helpers import local_job_config, rows_of

JOB = "tests.launch.test_forked:report_job"


def report_job(cfg: Any, ctx: Any) -> None:
    """Each rank writes what it sees; rank 1 exits with $GPULANE_TEST_EXIT when set."""
    print(f"rank {ctx.rank} says hello")
    print(f"rank {ctx.rank} says so on stderr", file=sys.stderr)
    facts = {
        "mark": os.environ.get("GPULANE_TEST_MARK"),
        "rank": os.environ["RANK"],
        "world": os.environ["WORLD_SIZE"],
        "cwd": os.getcwd(),
        "stdin": sys.stdin.read(),
    }
    (Path(ctx.run_dir) / f"facts-{ctx.rank}.json").write_text(json.dumps(facts))
    code = os.environ.get("GPULANE_TEST_EXIT")
    if code and ctx.rank == 1:
        sys.exit(int(code))
    if ctx.is_leader:
        from gpulane.record import Row, RowWriter

        with RowWriter(ctx.run_dir) as writer:
            writer.write(
                Row(run_id="facts", kind="collective", backend="test", op="all_reduce", time_us=1.0)
            )


def _launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str, mark: str
) -> tuple[int, Path]:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    monkeypatch.setenv("GPULANE_TEST_MARK", mark)
    monkeypatch.chdir(tmp_path)
    cfg = local_job_config(tmp_path / mark)
    cfg.launcher.start = start
    run = make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=2)
    return launch_job(saved, run, {}, JOB, 2, "cpu"), run.path


def _facts(run: Path) -> list[dict[str, Any]]:
    return [json.loads((run / f"facts-{r}.json").read_text()) for r in range(2)]


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_a_rank_sees_what_a_new_process_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    # Two launches from this one process: with start=fork the second reuses the server the
    # first started, and must still see its own launch's environment.
    for mark in ("first", "second"):
        code, run = _launch(tmp_path, monkeypatch, start, mark)
        assert code == 0
        facts = _facts(run)
        assert [f["mark"] for f in facts] == [mark, mark]
        assert [f["rank"] for f in facts] == ["0", "1"]
        assert {f["world"] for f in facts} == {"2"}
        assert {f["cwd"] for f in facts} == {str(tmp_path)}
        assert {f["stdin"] for f in facts} == {""}
        for r in range(2):
            log = (run / "logs" / f"rank-{r}.log").read_text()
            assert f"rank {r} says hello" in log and f"rank {r} says so on stderr" in log
        assert len(rows_of(run)) == 1


def test_a_failing_rank_is_told_alike_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPULANE_TEST_EXIT", "7")
    said = {}
    for start in ("fork", "exec"):
        code, run = _launch(tmp_path, monkeypatch, start, start)
        assert code != 0
        (error,) = [r for r in rows_of(run) if r["status"] == "error"]
        said[start] = re.sub(r"pid \d+", "pid N", error["error"]).replace(str(run), "RUN")
    assert said["fork"] == said["exec"]
    assert "rank 1 (pid N)" in said["fork"] and "7" in said["fork"]


def test_the_handle_answers_as_popen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """poll() is None while the rank runs and its status after; wait() with a timeout that
    runs out raises as Popen's does; kill() ends it with -9."""
    import subprocess

    cfg = local_job_config(tmp_path)
    run = make_run_dir(cfg)
    save_config(cfg, run, world_size=2)
    log = run.path / "lonely.log"
    # A lone rank 0 of 2: it waits for a peer that never comes (the rendezvous).
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}  # fmt: skip
    rank = start_rank("tests.launch.test_forked:sleep_job", run.path, env, log)
    assert isinstance(rank, ForkedRank) and rank.pid > 0
    assert rank.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        rank.wait(timeout=0.2)
    rank.kill()
    assert rank.wait(timeout=30) == -9
    assert rank.poll() == -9


def sleep_job(cfg: Any, ctx: Any) -> None:
    import time

    time.sleep(120)


def test_ranks_of_python_m_gpulane_cli_say_no_runpy_warning(tmp_path: Path) -> None:
    """`python -m gpulane.cli`: the server imported the module, and each forked rank runs
    it again as __mp_main__ (main_preload); runpy's warning of that is not the user's."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "gpulane.cli", "sweep", "device=cpu", "ranks=2",
         "sizes.min=8", "sizes.max=64", "progress=false", f"results_dir={tmp_path}"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RuntimeWarning" not in proc.stderr, proc.stderr[-2000:]
    assert rows_of(next(p for p in tmp_path.iterdir() if p.is_dir()))  # it measured
