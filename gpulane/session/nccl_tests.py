"""``gpulane sweep backend=nccl_tests``: the user's own nccl-tests build, driven by the same
launchers as gpulane's own ranks and kept as the same rows.

gpulane never downloads or builds nccl-tests. It finds the binaries (``backend.home``,
then ``$NCCL_TESTS_HOME``, each also with ``build/``, then ``PATH``), builds one command
line per collective and type from the sweep configuration every backend shares, and hands
it to the configured launcher as a program: locally one process driving every GPU
(``-g N``), under mpirun or Slurm one rank per GPU (``-g 1``, an MPI=1 build). The
launcher puts rank 0's output in the run directory (kept as
``nccl-tests-<op>-<type>.log``); the table shows its lines as nccl-tests prints them, and
when the binary ends its output becomes rows (full precision from the ``-J`` JSON where
the binary writes one), with what gpulane saw of the process (an exit status, silence
past ``timeout_s``, an interrupt) as error rows a user can act on.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any

from gpulane.collectives.nccl_tests.args import test_args
from gpulane.collectives.nccl_tests.binaries import (
    find_binaries,
    help_text,
    supports_json,
    supports_per_iter,
)
from gpulane.collectives.nccl_tests.live import LiveRows
from gpulane.collectives.nccl_tests.outcome import Outcome, rows_of_outcome
from gpulane.collectives.spec import collective
from gpulane.collectives.table import SweepView
from gpulane.config.backend import NcclTestsBackendConfig
from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError
from gpulane.launch.base import LaunchResult, LaunchSpec
from gpulane.record import Row, own_rows_writer, shaping_env
from gpulane.rundir import RunDir, make_run_dir, rank_env, save_config
from gpulane.session.prepare import SweepRun, launcher_for
from gpulane.session.run import RunSession, SessionSpec
from gpulane.session.signals import Terminated, sigterm_as_exception


class LiveOnce:
    """The sweep table over live rows and the rows kept later: a table line shown while
    the binary ran is not shown again when its kept row lands."""

    def __init__(self, view: SweepView) -> None:
        self.view = view
        self.total = view.total
        self.seen: set[tuple[Any, ...]] = set()

    @staticmethod
    def key(row: Row) -> tuple[Any, ...]:
        extra = row.extra or {}
        requested = extra.get("requested_bytes", row.size_bytes)
        return (row.op, row.dtype, requested, bool(row.in_place))

    def add(self, row: Row) -> list[str]:
        if row.time_us is not None:
            key = self.key(row)
            if key in self.seen:
                return []
            self.seen.add(key)
        return self.view.add(row)

    def flush(self) -> list[str]:
        return self.view.flush()

    def done(self) -> int:
        return self.view.done()

    def current(self) -> str:
        return self.view.current()

    def summary(self, rows: list[Row]) -> list[str]:
        return self.view.summary(rows)

    def problems(self, rows: list[Row]) -> list[str]:
        bad = [r for r in rows if r.status != "ok"]
        if not bad:
            return []
        more = f" (and {len(bad) - 1} more error rows)" if len(bad) > 1 else ""
        return [f"{bad[0].error}{more}"]


class LogPump:
    """New complete lines of rank 0's output, fed to the live table."""

    def __init__(self, log: Path, live: LiveRows) -> None:
        self.log = log
        self.live = live
        self.offset = 0
        self.partial = ""

    def __call__(self) -> tuple[list[Row], list[str]]:
        try:
            with open(self.log, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return [], []
        self.offset += len(data)
        text = self.partial + data.decode("utf-8", errors="replace")
        *lines, self.partial = text.split("\n")
        rows: list[Row] = []
        notes: list[str] = []
        for line in lines:
            new, said = self.live.feed(line + "\n")
            rows += new
            notes += said
        return rows, notes


def run_nccl_tests(
    sweep: SweepRun, run: RunDir | None = None, env: dict[str, str] | None = None
) -> int:
    """Every (collective, type) of the prepared sweep through nccl-tests; rows into the run."""
    cfg, plan, world = sweep.cfg, sweep.plan, sweep.world
    env = sweep.env if env is None else env
    backend = cfg.backend
    assert isinstance(backend, NcclTestsBackendConfig)
    binaries = {op: collective(op).binary for op in plan.collectives}
    found = find_binaries(sorted(set(binaries.values())), backend.home)
    use_json = str(backend.use_json).lower()
    _, per_process = launcher_for(sweep).program_layout(world)
    if run is None:
        run = make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=world, device="cuda", nodes=cfg.nodes or 1)
    ranks_env = rank_env(run.path, env, True)
    child_env = {**os.environ, **ranks_env}
    common: dict[str, Any] = {
        "run_id": run.run_id,
        "build": run.build,
        "source": "measured",
        "env": shaping_env(child_env),
        "world_size": world,
        "nodes": saved.nodes,
        "path": saved.path,
    }
    view = LiveOnce(SweepView(plan.lines, len(plan.placements)))
    spec = SessionSpec("sweep", "collective", "nccl-tests", "nccl-tests", world)
    session = RunSession(run, spec, view, env, progress=bool(cfg.progress))
    with session.display, sigterm_as_exception():
        try:
            for i, (op, dtype) in enumerate((o, d) for o in plan.collectives for d in plan.dtypes):
                binary = found[binaries[op]]
                help_out = help_text(binary, child_env)
                json_ok = supports_json(help_out)
                if use_json == "true" and not json_ok:
                    raise InputError(
                        f"backend.use_json=true but {binary} does not list -J in its -h output "
                        "(nccl-tests older than 2.16?); use backend.use_json=auto"
                    )
                stem = f"nccl-tests-{op}-{dtype}"
                json_path = run.path / f"{stem}.json" if json_ok and use_json != "false" else None
                per_iter = bool(backend.per_iter) and supports_per_iter(help_out)
                argv = [
                    str(binary),
                    *test_args(saved, plan, op, dtype, per_process, json_path, per_iter),
                ]
                _one_binary(
                    session, sweep, saved, run, ranks_env, argv, op, stem, json_path, common,
                    i == 0,
                )  # fmt: skip
        except (KeyboardInterrupt, Terminated) as ex:
            return session.interrupt(ex)
    return session.conclude(None)


def _one_binary(
    session: RunSession, sweep: SweepRun, cfg: SweepConfig, run: RunDir, env: dict[str, str],
    argv: list[str], op: str, stem: str, json_path: Path | None, common: dict[str, Any],
    first: bool,
) -> None:  # fmt: skip
    """One launch of one binary: shown live, then kept as rows; ``cfg`` as saved."""
    plan = sweep.plan
    launcher = launcher_for(sweep)
    procs, _ = launcher.program_layout(int(common["world_size"]))
    timeout_s = float(cfg.timeout_s or 0)
    launch = LaunchSpec(run.path, procs, env, timeout_s, program=argv, run_id=run.run_id)
    session.begin(launcher, launch, header=first)
    command = launcher.command_line(launch)
    session.say(f"# nccl-tests: {shlex.join(command)}")
    log = run.path / "logs" / "rank-0.log"
    session.pump = LogPump(log, LiveRows(plan.placements, dict(common), op))
    while not session.step():
        time.sleep(launcher.poll_s)
    result = session.result
    assert result is not None
    kept = run.path / f"{stem}.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    kept.write_text(f"# gpulane: {shlex.join(command)}\n{text}")
    rows = rows_of_outcome(
        _outcome(result, text), command, Path(argv[0]), op, json_path, plan,
        int(common["world_size"]), common, launcher.name, kept.name, timeout_s,
    )  # fmt: skip
    with own_rows_writer(run.path) as writer:
        for row in rows:
            writer.write(row)
    session.pump = None
    for line in _summary(rows):
        session.say(line)


def _outcome(result: LaunchResult, text: str) -> Outcome:
    codes = [c for c in result.returncodes.values() if c is not None]
    code = next((c for c in codes if c != 0), codes[0] if codes else None)
    return Outcome(code, text, timed_out=result.timed_out)


def _summary(rows: list[Row]) -> list[str]:
    measured = [r for r in rows if r.time_us is not None]
    facts = measured[0].extra if measured else rows[0].extra if rows else {}
    nt = (facts or {}).get("nccl_tests") or {}
    out = []
    if "out_of_bounds" in nt:
        verdict = "OK" if nt.get("out_of_bounds_ok") else "FAILED"
        out.append(f"# Out of bounds values : {nt['out_of_bounds']} {verdict}")
    if "avg_busbw_gbps" in nt:
        out.append(f"# Avg bus bandwidth    : {nt['avg_busbw_gbps']:g}")
    return out
