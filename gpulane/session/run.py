"""The run session: the one place where a run is shown, stopped and concluded.

Every kind of run (a sweep on any backend, nccl-tests, copies, token rates) under every
launcher goes through :class:`RunSession`:

- the header: what runs where, the build, the run id, the environment given to the ranks;
- the live table: rows read from ``rows.jsonl`` as the ranks append them, printed by the
  run kind's :class:`View`, and the launcher's and ranks' notes;
- the progress line, with ETA, and a "starting N ranks…" state before the first row;
- Ctrl-C -> 130 and SIGTERM -> 143, the ranks ended and every row kept;
- the error row when the run failed (naming the rank, host or task), the summary, the
  exit status (1 for a failed run, wrong results or nothing measured; 2 for bad input the
  ranks found) and the Parquet copy at the end, whatever happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rich.console import Console

from gpulane.errors import RunFailed, print_error, silence_stdout
from gpulane.launch.base import Launcher, LaunchResult, LaunchSpec
from gpulane.record import Row
from gpulane.rundir import NoteTail, RunDir, disk_note
from gpulane.session.live import Display, RowTail
from gpulane.session.signals import (
    Stop,
    Terminated,
    record_stop,
    sigterm_as_exception,
    stop_line,
    stop_words,
)


class View(Protocol):
    """How a run kind shows its rows (implemented beside the kind, on floor 2)."""

    total: int | None  # progress units the run will make (None: unknown)

    def add(self, row: Row) -> list[str]:
        """Lines to print for a new row (maybe none until a table line is complete)."""
        ...

    def flush(self) -> list[str]:
        """Lines still held back (half a table line) at the end."""
        ...

    def done(self) -> int:
        """Progress units made so far."""
        ...

    def current(self) -> str:
        """What runs now, for the progress line."""
        ...

    def summary(self, rows: list[Row]) -> list[str]:
        """Closing lines (averages, a results table, footnotes)."""
        ...

    def problems(self, rows: list[Row]) -> list[str]:
        """What makes the run a failure although it ran (wrong results), in words."""
        ...


@dataclass
class SessionSpec:
    """What the header and the error rows say about the run."""

    command: str  # sweep, tokens, copy
    kind: str  # collective, tokens, copy (the error row's kind)
    backend: str
    description: str  # "torch on 2 cpu ranks"
    world_size: int
    row_fields: dict[str, Any] = field(default_factory=dict)  # model, tp, pp, ...
    header: list[str] = field(default_factory=list)  # more "# ..." lines after the first
    estimate_s: float | None = None  # what the run will take at least, when it can be told


# Runs shorter than this get no estimate line: the progress line is enough.
ESTIMATE_ABOVE_S = 60.0


def usable_cores() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def launch_warnings(spec: SessionSpec, launcher: Launcher, launch: LaunchSpec) -> list[str]:
    """What a person should know before waiting: the run's estimate when it is long, more
    ranks than cores on this host, and a Slurm collective run of one rank."""
    from gpulane.session.live import clock

    out = []
    if spec.estimate_s is not None and spec.estimate_s > ESTIMATE_ABOVE_S:
        out.append(
            f"# estimate: this run takes at least {clock(spec.estimate_s)} "
            "(a smaller sizes.max or fewer collectives is faster)"
        )
    cores = usable_cores()
    if launcher.on_this_host and launch.nprocs > cores:
        out.append(
            f"# warning: {launch.nprocs} ranks on {cores} core(s): the ranks take turns, "
            f"every point is slower and timeout_s={spec_timeout(launch)} may end the run; "
            f"use ranks<={cores} or raise timeout_s"
        )
    lone = launcher.lone_rank_warning() if launch.nprocs == 1 else None
    if lone and spec.kind == "collective":
        out.append(f"# warning: {lone}")
    return out


def spec_timeout(launch: LaunchSpec) -> str:
    return f"{launch.timeout_s:g}"


class RunSession:
    """One run: begin (header, start), step (poll, show), finish (conclude)."""

    def __init__(
        self,
        run: RunDir,
        spec: SessionSpec,
        view: View,
        env: dict[str, str],
        progress: bool = True,
        console: Console | None = None,
        label: str | None = None,
    ) -> None:
        self.run = run
        self.spec = spec
        self.view = view
        self.env = env
        self.label = label  # a campaign's element: its lines are prefixed, no table
        self.display = Display(console, progress and label is None, view.total)
        self.display.log.floor_s = spec.estimate_s
        self.rows = RowTail(run.rows_path)
        self.notes = NoteTail(run.path)
        self.launcher: Launcher | None = None
        self.result: LaunchResult | None = None
        self.started_rows = False
        self.failure: str | None = None  # the run's failure in words, once concluded
        # Rows read from a program's output while it runs (nccl-tests), shown as they come;
        # the rows kept are what the run writes to rows.jsonl.
        self.pump: Callable[[], tuple[list[Row], list[str]]] | None = None

    # -- output --------------------------------------------------------------------------
    def say(self, text: str) -> None:
        if self.label is not None:
            text = f"# {self.label}: {text.removeprefix('# ')}"
        self.display.print(text)

    def header(self, launcher: Launcher, launch: LaunchSpec) -> None:
        where = launcher.describe(launch)
        self.say(
            f"# gpulane {self.spec.command}: {self.spec.description} ({where}), "
            f"build {self.run.build}, run {self.run.run_id}"
        )
        for line in self.spec.header:
            self.say(line)
        if self.env:
            self.say("# env: " + " ".join(f"{k}={v}" for k, v in self.env.items()))
        for line in launch_warnings(self.spec, launcher, launch):
            self.say(line)

    # -- the run -------------------------------------------------------------------------
    def run_launch(self, launcher: Launcher, launch: LaunchSpec, attach: bool = False) -> int:
        """Start (or follow, ``attach``) a launch, show it until it ends, conclude."""
        with self.display, sigterm_as_exception():
            try:
                self.begin(launcher, launch, attach)
                if launcher.detached and not attach:
                    for note in launcher.notes():
                        self.display.print(note)
                    return 0
                while not self.step():
                    time.sleep(launcher.poll_s)
            except (KeyboardInterrupt, Terminated) as ex:
                return self.interrupt(ex)
            except BrokenPipeError as ex:
                # `gpulane sweep | head` once head has read its lines: the run ends as if
                # interrupted (ranks ended, rows kept), quietly, as SIGPIPE ends a tool.
                silence_stdout()
                return self.interrupt(ex)
        return self.finish()

    def begin(
        self, launcher: Launcher, launch: LaunchSpec, attach: bool = False, header: bool = True
    ) -> None:
        """Start ``launch`` (``attach``: follow one started earlier); ``header``: print the
        run's first lines (a run of several launches prints them once)."""
        self.launcher = launcher
        self.result = None
        if not attach:
            launcher.check(launch)
            if self.label is None and header:
                self.header(launcher, launch)
            self.display.update(0, f"starting {launch.nprocs} ranks…")
            launcher.start(launch)

    def step(self) -> bool:
        """One poll: new rows and notes shown; True once the launch has ended."""
        assert self.launcher is not None
        result = self.launcher.poll()
        self._show_new()
        self.display.tick()
        if result is None:
            if not self.started_rows:
                state = self.launcher.state()
                if state != "running":
                    self.display.update(0, state)
            return False
        self.result = result
        return True

    def _show_new(self) -> None:
        assert self.launcher is not None
        for note in self.launcher.notes() + self.notes.read():
            self.say(note)
            # a view may turn a rank's note into the progress line's state ("compiling…")
            state = getattr(self.view, "state_of_note", lambda _note: None)(note)
            if state:
                self.display.update(self.view.done(), state)
        live: list[Row] = []
        if self.pump is not None:
            live, lines = self.pump()
            for line in lines:
                self.say(line)
        for row in live + self.rows.read():
            self.started_rows = True
            for line in self.view.add(row):
                if self.label is None:
                    self.display.print(line)
        if self.started_rows:
            self.display.update(self.view.done(), self.view.current())

    def interrupt(self, ex: BaseException) -> int:
        """Ctrl-C or SIGTERM: end the ranks, keep the rows, say so."""
        code, what = stop_words(ex)
        if self.launcher is not None:
            self.launcher.cancel()
            self._show_new()
            result = self.launcher.interrupted(what)
            self.write_error(result.row_error or result.failure or what, result)
        self.run.finish()
        stop = Stop(code, what, self.run.run_id, self.run.path, self.started_rows)
        record_stop(stop)  # a multirun stops too (commands/multirun.py)
        self.say(f"# {stop_line(stop)}")
        return code

    def finish(self) -> int:
        """The end of a launch: error row, summary, Parquet, exit status."""
        assert self.launcher is not None and self.result is not None
        result = self.result
        self._show_new()
        for line in self.view.flush():
            if self.label is None:
                self.display.print(line)
        if result.user_error is not None:  # the ranks refused the input
            code, message = result.user_error
            if not result.reported:
                self.write_error(message, result)
            self.run.finish()
            print_error(message)
            return code
        failure = result.failure
        if failure is not None:
            failure += disk_note(self.run.path)
            if not result.reported:
                self.write_error(result.row_error or failure, result)
        return self.conclude(failure)

    def conclude(self, failure: str | None) -> int:
        rows = self.run.rows()
        if self.label is None:
            for line in self.view.summary(rows):
                self.display.print(line)
            logs = self.launcher.logs_note() if self.launcher is not None else None
            extra = f"; {logs}" if logs else ""
            self.display.print(f"# rows: {self.run.rows_path} (and rows.parquet){extra}")
        self.run.finish()
        problems = ([failure] if failure else []) + self.view.problems(rows)
        if not problems and not any(r.status == "ok" for r in rows):
            problems.append(
                f"nothing was measured: the run ended without a single result row ({self.run.path})"
            )
        self.failure = "; ".join(problems) or None
        if self.label is None:  # a campaign names its elements' failures in its summary
            for problem in problems:
                print_error(problem)
        return RunFailed.exit_code if problems else 0

    def write_error(self, message: str, result: LaunchResult) -> None:
        at = result.stalled_at
        op = at.split()[0] if at and at not in ("started", "done") else "run"
        details = dict(result.details)
        row = Row(
            run_id=self.run.run_id,
            kind=self.spec.kind,
            backend=self.spec.backend,
            op=op,
            build=self.run.build,
            host=result.host,
            nodes=details.pop("nodes", None) or 1,
            world_size=details.pop("world_size", None) or self.spec.world_size,
            status="error",
            error=message,
            extra={"at": at, **details},
            **self.spec.row_fields,
        )
        self.run.write_error(row)
        if self.launcher is not None:
            self.launcher.on_reported()
