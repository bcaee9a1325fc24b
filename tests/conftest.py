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


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker, group in SERIAL_GROUPS.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.xdist_group(group))
                break
