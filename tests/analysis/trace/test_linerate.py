"""The line rate a trace is held against: given, or probed (gpulane.analysis.trace.linerate)."""

from __future__ import annotations

import pytest

from gpulane.analysis.trace.linerate import line_rate_for, main_device, probe_line_rate
from gpulane.analysis.trace.read import read_trace
from gpulane.errors import InputError
from tests.analysis.trace.traces import bad_trace
from tests.conftest import fixture_path


def test_probe_line_rate() -> None:
    rate, source = probe_line_rate(0)
    assert rate is None or (rate > 0 and source)


def test_given_line_rate_wins_and_zero_means_none() -> None:
    t = bad_trace()
    assert main_device(t) == 0  # the offload demo copies to GPU0
    assert line_rate_for(63.0, t) == (63.0, "--line-rate-gbps")
    assert line_rate_for(0.0, t) == (None, None)
    for wrong in (-1.0, float("nan"), float("inf")):
        with pytest.raises(InputError, match="--line-rate-gbps"):
            line_rate_for(wrong, t)


def test_no_probe_for_a_trace_without_gpu() -> None:
    # a CPU-only profile says nothing about this machine's PCIe: no line rate, not a guess
    t = read_trace(fixture_path("traces/cpu/copies.json.gz"))
    assert not t.has_gpu
    assert line_rate_for(None, t) == (None, None)
