"""Shared test helpers: fixture paths (real output copied from ../shared/fixtures)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# In tests.helpers (no pytest there): benchmarks' scripts use them in an install without
# the test extras; kept importable from here for the tests.
from tests.helpers import FIXTURES, fixture_path  # noqa: F401


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


# CI runs every property test on the same examples (Hypothesis' derandomize): a red CI
# then means a change broke something, not that a new random example was drawn. Local runs
# keep exploring new examples; a failure found there is added as a plain regression test.
if os.environ.get("GPULANE_CI"):
    from hypothesis import settings as _hyp_settings

    _hyp_settings.register_profile("ci", derandomize=True, print_blob=True)
    _hyp_settings.load_profile("ci")


# CI runs the tests on several workers (pytest-xdist, ``-n N --dist loadgroup``, see
# scripts/test.sh). Tests that share a real cluster run on one worker, one after another,
# as they would without workers: the Slurm clusters (their nodes, queues and the faults the
# 8-node campaigns inject) and Open MPI's mpirun (ranks oversubscribing the two cores).
# Everything else runs beside them. Without -n the groups change nothing.
SERIAL_GROUPS = {"slurm": "slurm", "mpi": "mpi"}
# The 8-node cluster (scripts/slurm-up.sh 8: its own slurmctld, nodes c1..c8 in their own
# network namespaces) is used by this module alone, and its faults touch only c1..c8: its
# campaigns (most of the Slurm tests' time, mostly waiting on jobs) run beside the tests
# of the single-node and 2-node clusters instead of after them.
OWN_CLUSTER = {"test_slurm_cluster.py": "slurm-nodes"}

# The tests that took longest in a CI run (seconds, node id), longest first: started first,
# so that no long test starts last while the other workers have run out of work (the groups
# above go first anyway: xdist hands out its largest groups first). Only the order changes;
# a test not listed keeps its place after them. Refresh from a CI log:
# python -m tests.slow_order LOG.
SLOW_TESTS = Path(__file__).parent / "slow_tests.txt"


def slow_first(items: list[pytest.Item]) -> None:
    try:
        lines = SLOW_TESTS.read_text().splitlines()
    except OSError:
        return
    seconds = {}
    for line in lines:
        value, _, nodeid = line.partition(" ")
        if nodeid and not line.startswith("#"):
            seconds[nodeid.strip()] = float(value)
    # A module's listed tests stay together (its module-scoped fixtures are set up once
    # per worker, not again after each test of another module), the module of the longest
    # test first. The sort is stable: the tests not listed keep their order, after these.
    module_max: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        module_max[module] = max(module_max.get(module, 0.0), seconds.get(item.nodeid, 0.0))

    def key(item: pytest.Item) -> tuple[float, str, float]:
        own = seconds.get(item.nodeid, 0.0)
        module = item.nodeid.split("::")[0]
        return (-module_max[module], module, -own) if own else (0.0, "", 0.0)

    items.sort(key=key)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow_first(items)
    for item in items:
        for marker, group in SERIAL_GROUPS.items():
            if item.get_closest_marker(marker) is not None:
                group = OWN_CLUSTER.get(item.path.name, group) if marker == "slurm" else group
                item.add_marker(pytest.mark.xdist_group(group))
                break


# GPULANE_TEST_CPU=FILE: each test's CPU seconds (its worker's and the processes it waited
# for: CLI calls, their ranks), wall seconds, start time and worker appended to FILE, to find where CI's time goes
# (benchmarks/ci/README.md). Slurm job steps run under slurmd and are not counted.
if os.environ.get("GPULANE_TEST_CPU"):
    import resource
    import time

    def _cpu() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
        cpu, wall, start = _cpu(), time.monotonic(), time.time()
        yield
        took = time.monotonic() - wall
        worker = os.environ.get("PYTEST_XDIST_WORKER", "-")
        line = f"{_cpu() - cpu:.2f} {took:.2f} {item.nodeid} {start:.1f} {worker}\n"
        with open(os.environ["GPULANE_TEST_CPU"], "a", encoding="utf-8") as fh:
            fh.write(line)
