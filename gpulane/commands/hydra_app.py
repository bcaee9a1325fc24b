"""Run a Hydra-configured command (sweep, copy, tokens, ...) from the `gpulane` CLI.

Hydra reads sys.argv, so the subcommand's own arguments are put there for the duration.
A :class:`GpulaneError` inside a job is shown as one line and turns into the exit status;
under multirun (-m) the other jobs still run and the worst status is returned.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import hydra
from omegaconf import DictConfig

from gpulane.errors import GpulaneError, print_error

Task = Callable[[DictConfig], int]


def comma_lists(argv: list[str], keys: frozenset[str] | set[str]) -> list[str]:
    """``key=a,b`` as the list ``key=[a,b]`` for the given keys (Hydra would refuse it as an
    ambiguous sweep), except under -m/--multirun, where a comma list sweeps as Hydra means."""
    if any(a in ("-m", "--multirun") for a in argv):
        return argv
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+~") in keys and "," in value and value[:1] not in "[\"'":
            arg = f"{key}=[{value}]"
        out.append(arg)
    return out


def run_hydra(config_name: str, task: Task, argv: list[str], prog: str) -> int:
    statuses: list[int] = []

    @hydra.main(config_path="pkg://gpulane.conf", config_name=config_name, version_base="1.3")
    def _job(cfg: DictConfig) -> None:
        try:
            statuses.append(int(task(cfg) or 0))
        except GpulaneError as err:
            print_error(err)
            statuses.append(err.exit_code)
        except KeyboardInterrupt:
            sys.stderr.write("gpulane: interrupted\n")
            statuses.append(130)
            raise SystemExit(130) from None

    saved = sys.argv
    sys.argv = [prog, *argv]
    try:
        _job()
    except SystemExit as ex:
        # Hydra exits 1 after printing a config error (unknown key, bad override).
        code = ex.code if isinstance(ex.code, int) else 1
        if code:
            return code
    finally:
        sys.argv = saved
    return max(statuses, default=0)
