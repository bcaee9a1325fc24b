"""The trace model (gpulane.analysis.trace.events)."""

from __future__ import annotations

from gpulane.analysis.trace.events import ReadInfo


def test_readinfo_complete() -> None:
    info = ReadInfo("p", "torch-chrome", 1, 1)
    assert info.complete
    info.truncated = True
    assert not info.complete
