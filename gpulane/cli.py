"""The `gpulane` command: one entry point, one module per subcommand.

Subcommands are imported lazily so that `gpulane topo` starts without torch, and a
missing optional dependency only affects the command that needs it.
"""

from __future__ import annotations

import difflib
import errno
import importlib
import sys
from collections.abc import Callable, Sequence

from gpulane import __version__
from gpulane.errors import STDOUT_GONE, GpulaneError, RunFailed, print_error, silence_stdout

# name -> ("module:function", one-line help). Each function takes argv (after the
# subcommand) and returns an exit status.
COMMANDS: dict[str, tuple[str, str]] = {
    "sweep": ("gpulane.commands.sweep:main", "collective sweep (Hydra overrides)"),
    "copy": ("gpulane.commands.copy:main", "host<->device and peer copy bandwidth"),
    "tokens": ("gpulane.commands.tokens:main", "TP/PP decode and prefill token rates"),
    "advise": ("gpulane.commands.advise:main", "TP vs PP recommendation"),
    "topo": ("gpulane.commands.topo:main", "GPU/NIC topology, path labels, PCIe links"),
    "doctor": ("gpulane.commands.doctor:main", "why is a path slow: ranked findings and fixes"),
    "parse": ("gpulane.commands.parse:main", "import nccl-tests, bandwidthTest, vLLM output"),
    "results": ("gpulane.commands.results:main", "list and filter stored rows"),
    "compare": ("gpulane.commands.compare:main", "compare builds or runs side by side"),
    "accept": ("gpulane.commands.accept:main", "acceptance run checked against rules"),
    "report": ("gpulane.commands.report:main", "HTML report of a run"),
    "join": ("gpulane.commands.join:main", "token rates beside collective rows"),
    "trace": ("gpulane.commands.trace:main", "copy bandwidth from profiler traces"),
    "collect": ("gpulane.commands.collect:main", "finish a detached Slurm run (wait=false)"),
    "reference": ("gpulane.commands.reference:main", "known-good figures; add your accepted runs"),
    "history": ("gpulane.commands.history:main", "trend per figure over runs; flags regressions"),
    "export": ("gpulane.commands.export:main", "verdicts, figures as OpenMetrics/JSON/JUnit"),
}

DEFAULT_COMMAND = "sweep"


def _usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = [
        f"gpulane {__version__}: measure the paths between GPUs and what they cost an LLM workload",
        "",
        "usage: gpulane [COMMAND] [ARGS...]     (no command runs the default sweep)",
        "",
        "commands:",
    ]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += [
        "",
        "Hydra commands (sweep, copy, tokens, advise, accept) take key=value overrides and",
        "-m for multirun; `gpulane sweep --help` lists their options.",
    ]
    return "\n".join(lines)


def _load(target: str) -> Callable[[list[str]], int]:
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def _broken_pipe_as_error() -> None:
    """rich ends the program with status 1 when stdout's reader has gone; gpulane answers
    a closed stdout in one place (main) whatever printed to it."""
    try:
        from rich.console import Console
    except ImportError:
        return

    def on_broken_pipe(self: Console) -> None:
        self.quiet = True
        raise BrokenPipeError

    Console.on_broken_pipe = on_broken_pipe  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a in ("-h", "--help") for a in args):  # help prints without rich
        _broken_pipe_as_error()
    try:
        code = _dispatch(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`| head`): like any tool killed by SIGPIPE, say nothing.
        silence_stdout()
        return STDOUT_GONE
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
            raise
        # stdout on a full device: the rows are on disk already (or their own error said so).
        silence_stdout()
        print_error(f"cannot write the output: {err.strerror}")
        return RunFailed.exit_code


def _dispatch(args: list[str]) -> int:
    if args and args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args and args[0] in ("-V", "--version"):
        print(f"gpulane {__version__}")
        return 0
    if args and args[0] in COMMANDS:
        name, rest = args[0], args[1:]
    elif not args or "=" in args[0] or args[0].startswith("-"):
        name, rest = DEFAULT_COMMAND, args
    else:
        close = difflib.get_close_matches(args[0], list(COMMANDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        print_error(f"unknown command {args[0]!r}{hint} (commands: {', '.join(COMMANDS)})")
        return 2
    try:
        return int(_load(COMMANDS[name][0])(rest) or 0)
    except GpulaneError as err:
        print_error(err)
        return err.exit_code
    except KeyboardInterrupt:
        print_error("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
