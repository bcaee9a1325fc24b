"""Ctrl-C and SIGTERM: both stop a run with its rows kept; 130 and 143 as shells count.

A session that was stopped records it here (:func:`record_stop`), so that what runs
several sessions in one process (a Hydra multirun: ``commands/multirun.py``) stops too,
instead of starting the next run as if the user had not asked to stop."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from gpulane.errors import STDOUT_GONE

INTERRUPTED = 130  # 128 + SIGINT
TERMINATED = 143  # 128 + SIGTERM


class Terminated(BaseException):
    """SIGTERM (Slurm pre-emption, a kill): handled like Ctrl-C, exit status 143.

    A BaseException, as KeyboardInterrupt is: libraries' ``except Exception`` (submitit's
    sacct poll, for one) must not swallow it."""


@contextmanager
def sigterm_as_exception() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_words(ex: BaseException) -> tuple[int, str]:
    """(exit status, words) for an interrupt."""
    if isinstance(ex, Terminated):
        return TERMINATED, "terminated (SIGTERM)"
    if isinstance(ex, BrokenPipeError):
        return STDOUT_GONE, "stopped: the reader of its output went away"
    return INTERRUPTED, "interrupted"


@dataclass(frozen=True)
class Stop:
    """A run the user (or the system) stopped: its exit status, words and directory."""

    code: int
    what: str
    run_id: str | None = None
    path: Path | None = None
    measured: bool = False  # a row had come in before the stop


_STOPS: list[Stop] = []


def record_stop(stop: Stop) -> None:
    """Called by a session that was stopped; :func:`take_stop` hands it on once."""
    _STOPS.append(stop)


def take_stop() -> Stop | None:
    """The latest stop since the last call (None: nothing was stopped)."""
    if not _STOPS:
        return None
    stop = _STOPS[-1]
    _STOPS.clear()
    return stop


def stop_line(stop: Stop) -> str:
    """The one line a stopped run ends with: start-up (nothing measured) or partial rows."""
    if not stop.measured:
        return f"{stop.what} during start-up; nothing measured"
    where = f" in {stop.path}" if stop.path is not None else ""
    return f"{stop.what}: rows so far kept{where} (a partial run)"
