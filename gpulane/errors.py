"""Errors a user can act on.

Anything raised as a :class:`GpulaneError` is shown as one line (no traceback) by the
command line, and the process exits with the error's ``exit_code``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class GpulaneError(Exception):
    """An error whose message tells the user what is wrong and what to do."""

    exit_code = 2


class InputError(GpulaneError):
    """Bad input: a configuration value, a file, a command-line argument."""

    exit_code = 2


class ParseError(InputError):
    """A file that cannot be read as what it claims to be.

    ``source`` names the file (or ``<text>``) and ``line`` the 1-based line number
    where reading stopped, when known.
    """

    def __init__(self, message: str, source: str = "<text>", line: int | None = None) -> None:
        self.source = source
        self.line = line
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {message}")
        self.reason = message


class RunFailed(GpulaneError):
    """A run that started but could not finish (a rank died, hung, or a backend failed)."""

    exit_code = 1


class MissingComponent(GpulaneError):
    """A component that is not installed or not reachable (NCCL, MPI, a GPU, nccl-tests)."""

    exit_code = 2


def print_error(message: object) -> None:
    """The one way gpulane tells a user something went wrong: one line on stderr, no
    traceback. A message of several lines (a stderr tail) keeps its first line here."""
    import sys

    text = str(message).strip() or type(message).__name__
    _write(sys.stderr, f"gpulane: error: {text}\n")


# 128 + SIGPIPE: the status of a tool whose reader went away (`gpulane results | head`)
STDOUT_GONE = 141


def silence_stdout() -> None:
    """Point stdout at /dev/null: its reader went away or its device is full, and nothing
    more written to it (Python's own flush at exit included) may fail again."""
    import contextlib
    import os
    import sys

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def print_warning(message: object) -> None:
    import sys

    _write(sys.stderr, f"gpulane: warning: {str(message).strip()}\n")


def _write(stream: object, text: str) -> None:
    # stderr itself may be gone (a closed pipe) or full: the exit status still says it.
    try:
        stream.write(text)  # type: ignore[attr-defined]
        stream.flush()  # type: ignore[attr-defined]
    except (OSError, ValueError):
        pass


def did_you_mean(given: object, choices: Iterable[str]) -> str:
    """``"; did you mean 'float'?"`` for a word close to one of ``choices`` (a typo such as
    ``flaot``), else ``""``: the tail an unknown-word error puts after the word."""
    close = difflib.get_close_matches(str(given).strip().lower(), list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
