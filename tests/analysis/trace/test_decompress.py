"""gzip trace files, whole and cut off (gpulane.analysis.trace.decompress)."""

from __future__ import annotations

import gzip
from pathlib import Path

from gpulane.analysis.trace.decompress import decompress
from gpulane.analysis.trace.read import read_trace
from tests.conftest import fixture_path


def test_truncated_gzip(tmp_path: Path) -> None:
    raw = fixture_path("traces/h200/bad.json.gz").read_bytes()
    p = tmp_path / "bad.json.gz"
    p.write_bytes(raw[: len(raw) * 2 // 3])
    t = read_trace(p)
    assert t.info.truncated
    assert any("gzip stream ends early" in w for w in t.info.warnings)
    assert t.info.events_read > 0


def test_decompress_plain_and_members() -> None:
    assert decompress(b"abc", "x") == (b"abc", [], False)
    data, _warnings, truncated = decompress(gzip.compress(b"abc") + gzip.compress(b"def"), "x")
    assert data == b"abcdef" and not truncated
