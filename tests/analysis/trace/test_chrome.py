"""Kineto Chrome-trace events as copies and kernels (gpulane.analysis.trace.chrome)."""

from __future__ import annotations

import json

import pytest

from gpulane.analysis.trace.chrome import parse_chrome_bytes
from gpulane.analysis.trace.events import ON_DEVICE, PCIE
from gpulane.analysis.trace.summary import summarize
from tests.analysis.trace.traces import (
    LAYER_BYTES,
    bad_trace,
    good_trace,
    plain_text,
)


def test_gpu_trace_copies_from_memcpy_events() -> None:
    bad, good = bad_trace(), good_trace()
    for t in (bad, good):
        assert t.info.complete and t.has_gpu_activity
        assert len(t.copies) == 4
        assert len(t.kernels) == 16
        for c in t.copies:
            assert c.direction == "H2D" and not c.direction_inferred
            assert c.link == PCIE and not c.link_inferred
            assert c.bytes == LAYER_BYTES
            assert c.dst_memory == "device"
            assert c.op == "aten::copy_"
    assert {c.src_memory for c in bad.copies} == {"pageable"}
    assert {c.src_memory for c in good.copies} == {"pinned"}


def test_bare_event_array_and_bad_fields() -> None:
    events = [
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoH (Device -> Pinned)",
            "ts": 10,
            "dur": 2,
            "args": {"bytes": 2000, "device": 1, "stream": 3},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoD (Device -> Device)",
            "ts": "12",
            "dur": 1,
            "args": {"bytes": 4000},
        },
        {"ph": "X", "cat": "gpu_memcpy", "name": "weird", "ts": None, "dur": 1},
        "not an event",
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 9, "dur": 5, "args": {"device": 1}},
    ]
    t = parse_chrome_bytes(json.dumps(events).encode())
    assert [c.direction for c in t.copies] == ["D2H", "D2D"]
    assert [c.link for c in t.copies] == [PCIE, ON_DEVICE]
    assert t.copies[0].gbps == pytest.approx(1.0)
    assert t.info.events_skipped == 2
    s = summarize(t)
    # the DtoH (GPU1) runs under GPU1's kernel for 2 us; the DtoD has no device, so any
    # kernel counts: 1 us
    assert s.overlap_us == pytest.approx(3.0)


def test_cut_gpu_trace_that_lost_its_memcpy_events_says_so() -> None:
    # kineto writes host ops first: cut before the first GPU memcpy event, the copies
    # come from the copy_ ops, marked inferred, and the warnings say why
    text = plain_text("traces/h200/bad.json.gz")
    t = parse_chrome_bytes(text[: text.index('"cat": "gpu_memcpy"')].encode(), "cut")
    assert t.info.truncated and t.has_gpu and t.copies
    assert all(c.source == "cpu" and c.link_inferred for c in t.copies)
    assert all(c.bytes == LAYER_BYTES for c in t.copies)
    assert any("lost this trace's GPU memcpy events" in w for w in t.info.warnings)
