"""A trace as result rows, kind copy, source trace (gpulane.analysis.trace.rows)."""

from __future__ import annotations

import json

import pytest

from gpulane.analysis.trace.rows import trace_rows
from tests.analysis.trace.traces import (
    LAYER_BYTES,
    bad_trace,
)


def test_rows_kind_copy_source_trace() -> None:
    rows = trace_rows(bad_trace(), "run-1", "x16-gen5", line_rate_gbps=63.0)
    assert len(rows) == 1
    r = rows[0]
    assert (r.kind, r.source, r.backend, r.op) == ("copy", "trace", "torch-profiler", "h2d")
    assert (r.size_bytes, r.count, r.src, r.dst, r.memory) == (
        LAYER_BYTES,
        4,
        "host",
        "GPU0",
        "pageable",
    )
    assert r.build == "x16-gen5"
    assert r.algbw_gbps is not None and r.algbw_gbps < 20
    assert r.expected_gbps == 63.0 and r.efficiency == pytest.approx(r.algbw_gbps / 63.0)
    assert r.extra["blocking"] is True and r.extra["trace_file"].endswith("bad.json.gz")
    json.dumps(r.to_dict())
