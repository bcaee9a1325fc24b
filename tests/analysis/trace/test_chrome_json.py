"""Chrome-trace JSON that is cut off or damaged (gpulane.analysis.trace.chrome_json)."""

from __future__ import annotations

from pathlib import Path

from gpulane.analysis.trace.chrome import parse_chrome_bytes
from gpulane.analysis.trace.chrome_json import parse_chrome_json
from gpulane.analysis.trace.read import read_trace
from tests.analysis.trace.traces import (
    plain_text,
)


def test_truncated_json_keeps_events_before_the_cut(tmp_path: Path) -> None:
    text = plain_text("traces/h200/good.json.gz")
    full = parse_chrome_bytes(text.encode(), "full")
    assert not full.info.truncated
    for frac in (0.3, 0.6, 0.9):
        cut = text[: int(len(text) * frac)]
        p = tmp_path / f"cut{frac}.json"
        p.write_text(cut)
        t = read_trace(p)
        assert t.info.truncated and not t.info.complete
        assert 0 < t.info.events_read < full.info.events_read
        assert t.info.bytes_read <= len(cut.encode())
        msg = " ".join(t.info.warnings)
        assert "cut off" in msg and f"{t.info.events_read} complete events" in msg
        # events before the cut are exactly the first events of the whole file
        _, events, _, _, _ = parse_chrome_json(cut)
        _, all_events, _, _, _ = parse_chrome_json(text)
        assert events == all_events[: len(events)]
        # GPU copies found are copies of the whole trace; where the cut lost every GPU
        # memcpy event, the host-side copy ops are reported instead, marked inferred
        full_starts = [c.start_us for c in full.copies]
        for c in t.copies:
            assert c.start_us in full_starts if c.source == "gpu" else c.link_inferred


def test_damaged_event_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    text = plain_text("traces/h200/bad.json.gz")
    i = text.index('"cat": "kernel"')
    damaged = text[:i] + '"cat": kernel oops' + text[i + len('"cat": "kernel"') :]
    p = tmp_path / "damaged.json"
    p.write_text(damaged)
    t = read_trace(p)
    assert not t.info.truncated and t.info.events_skipped >= 1 and not t.info.complete
    assert any("damaged event skipped" in w and "line" in w for w in t.info.warnings)
    assert len(t.copies) == 4 and len(t.kernels) == 15


def test_cut_after_the_event_list_is_not_whole() -> None:
    # kineto writes "traceName" after the events: a cut there keeps every event, and the
    # file must still say it is not whole
    text = plain_text("traces/h200/bad.json.gz")
    end = text.rindex('"traceName"')
    whole = parse_chrome_json(text)
    meta, events, warnings, truncated, _ = parse_chrome_json(text[: end + 5])
    assert events == whole[1] and truncated
    assert any("cut off or damaged after the event list" in w for w in warnings)
    assert meta.get("deviceProperties") == whole[0]["deviceProperties"]


def test_damage_inside_the_list_only_is_not_a_cut() -> None:
    text = plain_text("traces/h200/bad.json.gz")
    i = text.index('"cat": "kernel"')
    damaged = text[:i] + '"cat": kernel oops' + text[i + len('"cat": "kernel"') :]
    _, _, warnings, truncated, _ = parse_chrome_json(damaged)
    assert not truncated and any("damaged event skipped" in w for w in warnings)
