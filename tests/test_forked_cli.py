"""The tests' ``gpulane`` command, forked from a server that imported its libraries
(tests/forked_cli.py), answers as a new interpreter would: the same stdout, stderr and exit
status; its local ranks are forked from the worker's server; a timeout ends it as
``subprocess.run``'s does; an environment that changes how Python starts gets a new one."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from multiprocessing import forkserver
from pathlib import Path

import pytest

from gpulane.record import read_rows
from tests import forked_cli

SMALL = ("device=cpu", "ranks=2", "collectives=[all_reduce]", "sizes.min=1K", "sizes.max=4K",
         "iters=2", "warmup=1")  # fmt: skip


def _env(**more: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **more}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def _fresh(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpulane", *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [["--help"], ["sweep", "iters=-3"], ["results", "no-such-dir"], ["no-such-command"]],
    ids=["help", "bad-value", "missing-path", "unknown-command"],
)
def test_forked_answers_as_a_new_interpreter(tmp_path: Path, args: list[str]) -> None:
    env = _env(COLUMNS="100")
    forked = forked_cli.run(args, tmp_path, env, timeout=300)
    fresh = _fresh(args, tmp_path, env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode, fresh.stdout, fresh.stderr,
    )  # fmt: skip
    assert forked.returncode == (0 if args == ["--help"] else 2)


def test_a_real_sweep_forks_its_ranks_from_the_workers_server(tmp_path: Path) -> None:
    seen: dict[int, tuple[int | None, int | None]] = {}  # server: (parent, grandparent)
    done = threading.Event()

    def watch() -> None:  # every fork server alive while the command runs
        while not done.is_set():
            for pid in _fork_servers():
                parent = _parent(pid)
                seen.setdefault(pid, (parent, _parent(parent) if parent else None))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        out = forked_cli.run(["sweep", *SMALL, "results_dir=out"], tmp_path, _env(), 300)
    finally:
        done.set()
        watcher.join()
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    assert len(list(read_rows(run))) == 3 and "# rows:" in out.stdout
    # The ranks came from this worker's server, which is still there for the next
    # command: the command (a child of that server) started no server of its own.
    ours = forkserver._forkserver._forkserver_pid
    assert ours in seen and _parent(ours) == os.getpid()
    started = [pid for pid, (_, grand) in seen.items() if grand == ours]
    assert not started, f"the command started fork servers of its own: {started}"


def test_a_timeout_ends_the_command(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        forked_cli.run(["sweep", *SMALL, "results_dir=out"], tmp_path, _env(), timeout=0.3)
    assert caught.value.cmd[1:3] == ["-m", "gpulane"]


def test_an_environment_that_changes_the_start_gets_a_new_interpreter() -> None:
    assert forked_cli.forkable(_env())
    assert forked_cli.forkable(_env(GPULANE_ANYTHING="1"))
    assert not forked_cli.forkable(_env(PYTHONPATH="/elsewhere"))
    assert not forked_cli.forkable(_env(PYTHONWARNINGS="error"))
    assert not forked_cli.forkable(_env(PYTHONFAULTHANDLER="1"))


def _fork_servers() -> set[int]:
    """multiprocessing fork servers running now, anywhere on this machine."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
        except OSError:
            continue
        if b"multiprocessing.forkserver" in cmdline:
            found.add(int(proc.name))
    return found


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
