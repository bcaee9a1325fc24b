"""The `gpulane` command: one entry point, one module per subcommand.

Subcommands are imported lazily so that `gpulane topo` starts without torch, and a
missing optional dependency only affects the command that needs it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

from gpulane import __version__
from gpulane.errors import GpulaneError

# name -> ("module:function", one-line help). Each function takes argv (after the
# subcommand) and returns an exit status.
COMMANDS: dict[str, tuple[str, str]] = {
    "sweep": ("gpulane.collectives.command:main", "collective sweep (Hydra overrides)"),
    "copy": ("gpulane.transfers.command:main", "host<->device and peer copy bandwidth"),
    "tokens": ("gpulane.inference.command:main", "TP/PP decode and prefill token rates"),
    "advise": ("gpulane.planning.command:main", "TP vs PP recommendation"),
    "topo": ("gpulane.topology.command:main", "GPU/NIC topology, path labels, PCIe links"),
    "parse": ("gpulane.parse_command:main", "import nccl-tests, bandwidthTest, vLLM output"),
    "results": ("gpulane.analysis.results_command:main", "list and filter stored rows"),
    "compare": ("gpulane.analysis.compare_command:main", "compare builds or runs side by side"),
    "accept": ("gpulane.analysis.accept_command:main", "acceptance run checked against rules"),
    "report": ("gpulane.analysis.report_command:main", "HTML report of a run"),
    "join": ("gpulane.analysis.join_command:main", "token rates beside collective rows"),
    "trace": ("gpulane.analysis.trace_command:main", "copy bandwidth from profiler traces"),
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
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


def report_error(err: BaseException) -> None:
    """One line on stderr, no traceback."""
    sys.stderr.write(f"gpulane: error: {err}\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
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
        report_error(GpulaneError(f"unknown command {args[0]!r}; commands: {', '.join(COMMANDS)}"))
        return 2
    try:
        return int(_load(COMMANDS[name][0])(rest) or 0)
    except GpulaneError as err:
        report_error(err)
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("gpulane: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
