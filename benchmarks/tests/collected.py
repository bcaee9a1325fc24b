"""``mutmut run`` with the target's tests collected once, not once per mutant.

    python -m benchmarks.tests.collected run [--max-children N] [MUTANT_NAMES...]

mutmut 3.8 forks a child per mutant, and each child calls ``pytest.main`` again: a new
configuration, its plugins and a collection of the mutant's test node ids, then the tests,
then pytest's unconfigure (a full ``gc.collect``). On the gate's targets the tests a mutant
reaches take a small part of that child's time (benchmarks/tests/README.md, "Where a
mutant's time went").

Here mutmut runs as it does (same mutants, stats, clean run, forced-fail run, timeouts and
exit codes) with one change: its fork server (``ForkServerRunner``, mutmut's own runner for
``process_isolation = "forkserver"``) runs inside one ``pytest.main`` over the target's test
selection, from pytest's ``pytest_runtestloop`` hook, after collection. Each mutant's child,
forked from there, finds the items collected, keeps the ones mutmut's stats say reach the
mutant and runs them with pytest's own ``pytest_runtestloop`` (the runtest protocol, ``-x``,
setup and teardown of fixtures), then exits with the code ``pytest.main`` would return.
mutmut's trampolines read the mutant under test at call time, so items collected before
the mutant was set run it.

mutmut 3.8 has no option naming the test runner (its ``get_mutant_runner`` builds
``PytestRunner``), so this module hands ``mutmut.__main__`` its own factory; everything
else is mutmut's and pytest's code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable

import mutmut.__main__ as mutmut_main
import pytest
from mutmut.configuration import config
from mutmut.runners.harness import BadTestExecutionCommandsException, PytestRunner
from mutmut.utils.file_utils import change_cwd
from mutmut.utils.format_utils import strip_prefix
from mutmut.workers.isolation import ForkServerRunner, MutantRunner


class _Collected:
    """The pytest session the fork server collected; None outside it."""

    session: pytest.Session | None = None


def mutant_exit_code(session: pytest.Session, tests: Iterable[str]) -> int:
    """Run the collected items named in ``tests`` as ``pytest.main(tests)`` would, and
    return its exit code: 1 when a test failed (``-x`` stops at the first), 0 when all
    passed, 2 when interrupted, 3 on an internal error."""
    wanted = set(tests)
    items = [i for i in session.items if strip_prefix(i.nodeid, prefix="mutants/") in wanted]
    if len({strip_prefix(i.nodeid, prefix="mutants/") for i in items}) != len(wanted):
        # pytest.main refuses a node id it cannot find with exit code 4, which mutmut's
        # execute_pytest turns into this exception
        raise BadTestExecutionCommandsException(sorted(wanted))
    session.items = items
    session.testscollected = len(items)
    try:
        session.config.hook.pytest_runtestloop(session=session)
    except session.Failed:
        return int(pytest.ExitCode.TESTS_FAILED)
    except (KeyboardInterrupt, pytest.exit.Exception):
        return int(pytest.ExitCode.INTERRUPTED)
    except Exception:  # as pytest's wrap_session: anything else is its internal error
        return int(pytest.ExitCode.INTERNAL_ERROR)
    return int(pytest.ExitCode.TESTS_FAILED if session.testsfailed else pytest.ExitCode.OK)


class CollectedPytestRunner(PytestRunner):
    """mutmut's PytestRunner; a mutant's tests run on the items collected once."""

    def warm_up(self) -> None:
        """Nothing: the fork server collected the tests before it started serving."""

    def run_tests(self, *, mutant_name: str | None, tests: Iterable[str]) -> int:
        session = _Collected.session
        if mutant_name is None or session is None:  # clean and forced-fail runs: mutmut's
            return super().run_tests(mutant_name=mutant_name, tests=tests)
        return mutant_exit_code(session, tests)


class _Serve:
    """pytest plugin: after collection, the fork server's loop in place of the tests."""

    def __init__(self, serve: Callable[[], None]) -> None:
        self.serve = serve
        self.started = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if self.started:  # in a mutant's child: pytest's own loop runs its items
            return None
        self.started = True
        _Collected.session = session
        self.serve()
        return True


class CollectedForkServer(ForkServerRunner):
    """mutmut's fork server, serving from inside one pytest session of the selection."""

    def _forkserver_main(self, work_fd: int, result_fd: int) -> None:
        plugin = _Serve(
            lambda: super(CollectedForkServer, self)._forkserver_main(work_fd, result_fd)
        )
        runner = CollectedPytestRunner()
        # the same options as a mutant's run (mutmut's PytestRunner builds them), over the
        # target's whole selection; output to nowhere, as in mutmut's children
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (lives as the server)
        try:
            with change_cwd("mutants"):
                code = runner.execute_pytest(runner._pytest_args_regular_run([]), plugins=[plugin])
        finally:
            sys.stdout, sys.stderr = stdout, stderr
        if not plugin.started:  # collection failed: nothing was served
            raise RuntimeError(f"collecting the tests failed (pytest exit code {code})")


def collected_runner(max_workers: int = 1) -> MutantRunner:
    """mutmut's ``get_mutant_runner``, with the fork server that collects once."""
    if max_workers < 1:
        raise ValueError("max_workers must be at least 1")
    return CollectedForkServer(
        max_workers=max_workers,
        test_runner_class=CollectedPytestRunner,
        test_runner_args={},
        debug=config().debug,
        max_restarts=config().max_forkserver_restarts,
    )


def main() -> None:
    mutmut_main.get_mutant_runner = collected_runner
    mutmut_main.cli()


if __name__ == "__main__":
    main()
