"""Nsight Systems SQLite exports (gpulane.analysis.trace.nsys), on a file with the schema
of `nsys export --type sqlite`, built by tests.analysis.trace.traces."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gpulane.analysis.trace.events import ON_DEVICE, PCIE
from gpulane.analysis.trace.read import read_trace
from gpulane.analysis.trace.rows import trace_rows
from gpulane.analysis.trace.summary import summarize
from gpulane.errors import ParseError
from tests.analysis.trace.traces import (
    make_nsys_sqlite,
)


def test_nsys_sqlite(tmp_path: Path) -> None:
    p = tmp_path / "run.sqlite"
    make_nsys_sqlite(p)
    t = read_trace(p)
    assert t.info.format == "nsys-sqlite" and t.info.complete
    assert [c.direction for c in t.copies] == ["H2D", "H2D", "D2H", "D2D", "P2P"]
    assert [c.link for c in t.copies] == [PCIE, PCIE, PCIE, ON_DEVICE, "peer"]
    assert [round(c.gbps or 0) for c in t.copies] == [10, 50, 50, 1000, 400]
    assert [c.src_memory for c in t.copies] == ["pageable", "pinned", "device", "device", "device"]
    assert [c.blocking for c in t.copies] == [True, False, False, False, False]
    assert t.copies[0].host_us == pytest.approx(1150.0)
    assert t.copies[4].peer_device == 1
    assert t.kernels[0].name == "gemm_kernel"
    s = summarize(t, 63.0, "test")
    assert s.pcie_gbps == pytest.approx(40e6 / (1.6e3 * 1e3))
    assert s.blocking_count == 1 and s.blocking_us == pytest.approx(1150.0)
    # the kernel (3.1-4.1 ms) covers 100 us of the pinned H2D and 100 us of the D2H
    assert s.overlap_us == pytest.approx(200.0)
    rows = trace_rows(t, "r")
    assert {r.op for r in rows} == {"h2d", "d2h", "d2d", "p2p"}
    assert all(r.backend == "nsys" for r in rows)
    p2p = next(r for r in rows if r.op == "p2p")
    assert (p2p.src, p2p.dst) == ("GPU0", "GPU1")


def test_nsys_without_runtime_table_and_damaged(tmp_path: Path) -> None:
    p = tmp_path / "noruntime.sqlite"
    make_nsys_sqlite(p, with_runtime=False)
    t = read_trace(p)
    assert all(c.blocking is None for c in t.copies)
    assert any("CUPTI_ACTIVITY_KIND_RUNTIME" in w for w in t.info.warnings)

    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(p.read_bytes()[:600])
    with pytest.raises(ParseError, match=r"nsys export --type sqlite|SQLite"):
        read_trace(cut)

    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ParseError, match="CUPTI_ACTIVITY_KIND_MEMCPY"):
        read_trace(empty)


def test_runtime_call_without_correlation_is_left_out(tmp_path: Path) -> None:
    # correlationId may be NULL in an export; such a call joins no copy, and the file reads
    p = tmp_path / "nullcorr.sqlite"
    make_nsys_sqlite(p)
    con = sqlite3.connect(p)
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = NULL WHERE correlationId = 10"
    )
    con.commit()
    con.close()
    t = read_trace(p)
    assert t.info.complete and len(t.copies) == 5
    assert t.copies[0].blocking is None and t.copies[0].host_us is None
    assert [c.blocking for c in t.copies[1:]] == [False, False, False, False]
