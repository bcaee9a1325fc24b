"""The tests' ``gpulane`` command, forked from a server that imported its libraries
(tests/forked_cli.py), answers as a new interpreter would: the same stdout, stderr and exit
status; its exit handlers run (its rank server is gone after it); a timeout ends it as
``subprocess.run``'s does; an environment that changes how Python starts gets a new one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

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


def test_a_real_sweep_and_its_rank_server_ends(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    env = _env(GPULANE_TEST_MARK=mark)
    done = forked_cli.run(["sweep", *SMALL, "results_dir=out"], tmp_path, env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    assert (run / "rows.jsonl").stat().st_size > 0
    assert "# rows:" in done.stdout
    # Its exit handlers ran: no process of its own (the rank server) is left.
    deadline = time.monotonic() + 10
    while (left := _marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes of the command left running: {left}"


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


def _marked(mark: str) -> list[int]:
    """The processes whose environment holds ``GPULANE_TEST_MARK=mark``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if f"GPULANE_TEST_MARK={mark}".encode() in environ.split(b"\0"):
            found.append(int(proc.name))
    return found
