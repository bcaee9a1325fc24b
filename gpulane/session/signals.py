"""Ctrl-C and SIGTERM: both stop a run with its rows kept; 130 and 143 as shells count."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
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
