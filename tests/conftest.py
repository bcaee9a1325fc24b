"""Shared test helpers: fixture paths (real output copied from ../shared/fixtures)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_path(relative: str) -> Path:
    """Path of a captured fixture, e.g. fixture_path('h200x2/topo-m.txt')."""
    path = FIXTURES / relative
    assert path.exists(), f"missing fixture {path}"
    return path


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
