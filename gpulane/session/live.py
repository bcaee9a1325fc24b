"""What a session shows while a run goes: new rows read from the rows file as the ranks
append them, and one progress line (what runs, a bar, done/total, elapsed and ETA) under
the lines printed so far."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class RowTail:
    """Rows appended to a JSON Lines file since the last call (complete lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = ""

    def read(self) -> list[dict[str, Any]]:
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
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return out


def make_console() -> Console:
    # Not a terminal (a pipe, a file): wide enough that table lines never wrap.
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


class Display:
    """Lines above, one transient progress line below (only on a terminal)."""

    def __init__(self, console: Console | None, progress: bool, total: int | None) -> None:
        self.console = console or make_console()
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
            disable=not (progress and self.console.is_terminal),
        )
        self.task = self.progress.add_task("starting", total=total)

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
        self.progress.update(self.task, completed=done, description=description)
