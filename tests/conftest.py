"""Shared test helpers: fixture paths (real output copied from ../shared/fixtures)."""

from __future__ import annotations

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
