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
