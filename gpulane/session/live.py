"""What a session shows while a run goes: new rows read from the rows file as the ranks
append them, and one progress line (what runs, a bar, done/total, elapsed and ETA) under
the lines printed so far. A run that can forecast itself (a sweep:
``session/estimate.SweepForecast``) gives the ETA with its band and the point being
measured with its time so far, so that the line moves on a long point too."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from gpulane.record import Row, row_of
from gpulane.runfacts import FACTS_JSONL, FACTS_KEY, FactsReader, join


class RowTail:
    """Rows appended to a JSON Lines file since the last call (complete lines only), each
    joined with the run's facts (facts.jsonl beside it, written before the rows)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = ""
        self.facts = FactsReader(path.parent / FACTS_JSONL)

    def read(self) -> list[Row]:
        try:
            with open(self.path, encoding="utf-8") as fh:
                fh.seek(self.offset)
                data = fh.read()
                self.offset = fh.tell()
        except FileNotFoundError:
            return []
        data = self.partial + data
        lines = data.split("\n")
        self.partial = lines.pop()
        out = []
        for line in lines:
            if line.strip():
                try:
                    found = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(found, dict):
                    if FACTS_KEY in found:
                        base = self.facts.get(found[FACTS_KEY])
                        if base is None:
                            continue  # its facts unreadable: read_rows warns of it
                        found = join(found, base)
                    out.append(row_of(found))
        return out


def make_console() -> Console:
    # Not a terminal (a pipe, a file): wide enough that table lines never wrap.
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


class Forecast(Protocol):
    """A run's own forecast (a sweep's: session/estimate.SweepForecast)."""

    def observe(self, done: int, now: float) -> None: ...

    def eta(self, now: float) -> str: ...

    def now_doing(self, now: float) -> str | None: ...


# Seconds between two plain progress lines in a log (GPULANE_PROGRESS_S: tests use less):
# often enough that a long point shows it is still going.
LOG_EVERY_S = 5.0


def log_every_s() -> float:
    try:
        return float(os.environ.get("GPULANE_PROGRESS_S", LOG_EVERY_S))
    except ValueError:
        return LOG_EVERY_S


def clock(seconds: float) -> str:
    """0:01:05 as rich's columns print elapsed time."""
    whole = int(max(seconds, 0))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


class LogProgress:
    """The progress line for a log: when the live bar is not on a terminal (or stderr goes
    to a file), one plain line on stderr about every 10 s: done/total, elapsed, ETA."""

    def __init__(self, enabled: bool, total: int | None, every_s: float | None = None) -> None:
        self.enabled = enabled
        self.total = total
        self.every_s = log_every_s() if every_s is None else every_s
        self.started = time.monotonic()
        self.last = self.started
        self.done = 0
        self.what = "starting"
        # The run's own floor (a sweep's estimate): a doubling sweep's last points take
        # most of its time, so the points' linear rate alone promises too early an end.
        self.floor_s: float | None = None
        self.forecast: Forecast | None = None

    def update(self, done: int, what: str, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        self.done, self.what = done, what
        if self.forecast is not None:
            self.forecast.observe(done, time.monotonic())

    def eta(self, now: float) -> str:
        """ "ETA 0:01:10" (the forecast's, with its band), or "" when none can be told."""
        if self.forecast is not None:
            return self.forecast.eta(now) if not self.total or self.done < self.total else ""
        if self.total and 0 < self.done < self.total:
            elapsed = now - self.started
            left = elapsed / self.done * (self.total - self.done)
            if self.floor_s is not None:
                left = max(left, self.floor_s - elapsed)
            return f"ETA {clock(left)}"
        return ""

    def what_now(self, now: float) -> str:
        doing = self.forecast.now_doing(now) if self.forecast is not None else None
        return doing if doing and self.done else self.what

    def line(self, now: float) -> str:
        elapsed = now - self.started
        total = f"/{self.total}" if self.total else ""
        eta = self.eta(now)
        eta = f", {eta}" if eta else ""
        what = self.what_now(now)
        return f"# progress: {self.done}{total} points, {clock(elapsed)} elapsed{eta} ({what})"

    def tick(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self.enabled and now - self.last >= self.every_s:
            self.last = now
            try:
                sys.stderr.write(self.line(now) + "\n")
                sys.stderr.flush()
            except OSError:  # a log on a full device: the run goes on
                pass


class Display:
    """Lines above, one transient progress line below (only on a terminal), and a plain
    progress line every 10 s on stderr when that is a log (LogProgress)."""

    def __init__(self, console: Console | None, progress: bool, total: int | None) -> None:
        self.console = console or make_console()
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=self.console,
            transient=True,
            disable=not (progress and self.console.is_terminal),
        )
        self.task = self.progress.add_task("starting", total=total, eta="ETA -:--:--")
        bar_shown = progress and self.console.is_terminal
        self.log = LogProgress(progress and (not bar_shown or not sys.stderr.isatty()), total)

    def __enter__(self) -> Display:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def print(self, text: str) -> None:
        try:
            self.console.print(text, markup=False, highlight=False, crop=False, overflow="ignore")
        except BrokenPipeError:
            raise
        except OSError:  # stdout on a full device: the rows file still has everything
            pass

    def update(self, done: int, description: str, total: int | None = None) -> None:
        if total is not None:
            self.progress.update(self.task, total=total)
        self.log.update(done, description, total)
        self.progress.update(self.task, completed=done, description=description)
        self.tick()

    def tick(self) -> None:
        """Called at every poll: the bar's point and ETA, the log's line when it is due."""
        now = time.monotonic()
        if self.log.forecast is not None:  # the first point's start, seen at a poll
            self.log.forecast.observe(self.log.done, now)
        if not self.progress.disable:
            self.progress.update(
                self.task,
                description=self.log.what_now(now),
                eta=self.log.eta(now) or "ETA -:--:--",
            )
        self.log.tick(now)
