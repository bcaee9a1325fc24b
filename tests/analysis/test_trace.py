"""Trace parsing, classification and statistics (gpulane.analysis.trace)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.analysis.trace import (
    ON_DEVICE,
    PCIE,
    CopyEvent,
    ReadInfo,
    Trace,
    compare,
    decompress,
    histogram,
    overlap_length,
    parse_chrome_bytes,
    parse_chrome_json,
    probe_line_rate,
    read_trace,
    summarize,
    tensor_bytes,
    trace_rows,
    union_length,
)
from gpulane.errors import GpulaneError, InputError, ParseError
from tests.conftest import fixture_path

LAYER_BYTES = 2048 * 2048 * 2  # one bf16 2048x2048 weight of the offload demo (--small)


def _bad() -> Trace:
    return read_trace(fixture_path("traces/h200/bad.json.gz"))


def _good() -> Trace:
    return read_trace(fixture_path("traces/h200/good.json.gz"))


def _plain_text(name: str) -> str:
    return gzip.decompress(fixture_path(name).read_bytes()).decode()


# --------------------------------------------------------------------------------------
# GPU traces from the H200 (real): the offload loop done badly and done well


def test_gpu_trace_copies_from_memcpy_events() -> None:
    bad, good = _bad(), _good()
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


def test_bad_offload_is_blocking_and_slow_good_is_async_and_fast() -> None:
    bad, good = _bad(), _good()
    assert all(c.blocking for c in bad.copies)
    assert all(c.blocking_reason for c in bad.copies)
    assert all(c.blocking is False for c in good.copies)
    # bad copies ride the default stream that the kernels use; good ones a side stream
    kernel_streams = {k.stream for k in bad.kernels}
    assert {c.stream for c in bad.copies} <= kernel_streams
    assert not {c.stream for c in good.copies} & {k.stream for k in good.kernels}

    sb, sg = summarize(bad, 63.0, "test"), summarize(good, 63.0, "test")
    assert sb.pcie_gbps is not None and sg.pcie_gbps is not None
    assert sb.pcie_gbps < 20 < 40 < sg.pcie_gbps
    assert sb.blocking_count == 4 and sg.blocking_count == 0
    assert sb.blocking_us > 3000 and sg.blocking_us == 0
    # host waited at least as long as the copies themselves took
    assert sb.blocking_us >= sb.copy_time_us
    assert sb.overlap_fraction == 0.0
    assert sg.overlap_fraction is not None and sg.overlap_fraction > 0
    assert sb.pcie_efficiency is not None and sb.pcie_efficiency < 0.3
    assert sg.pcie_efficiency is not None and sg.pcie_efficiency > 0.7
    # histogram: bad in 5-20 GB/s, good in 50-80 GB/s, by count, bytes and time
    bins_b = {b.label: b for b in sb.histogram}
    bins_g = {b.label: b for b in sg.histogram}
    assert bins_b["5-20"].count == 4 and bins_b["5-20"].bytes == 4 * LAYER_BYTES
    assert bins_g["50-80"].count == 4 and bins_g["50-80"].time_us == pytest.approx(sg.copy_time_us)


def test_compare_says_which_way_things_went() -> None:
    changes = {c.key: c for c in compare(summarize(_bad(), 63.0), summarize(_good(), 63.0))}
    ratio = changes["pcie_gbps"].ratio
    assert changes["pcie_gbps"].better is True and ratio is not None and ratio > 4
    assert changes["blocking_us"].better is True and changes["blocking_us"].after == 0
    assert changes["overlap_fraction"].better is True
    assert changes["bytes"].delta == 0 and changes["bytes"].better is None


def test_rows_kind_copy_source_trace() -> None:
    rows = trace_rows(_bad(), "run-1", "x16-gen5", line_rate_gbps=63.0)
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


# --------------------------------------------------------------------------------------
# CPU traces: recorded here with torch.profiler, bytes from the recorded shapes


def _make_cpu_module():  # type: ignore[no-untyped-def]
    path = Path(__file__).parents[1] / "fixtures" / "traces" / "make_cpu_trace.py"
    spec = importlib.util.spec_from_file_location("make_cpu_trace", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def recorded_cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mod = _make_cpu_module()
    path = tmp_path_factory.mktemp("cpu") / "copies.json"
    mod.record(str(path))
    return path


def _expected_cpu_copy_bytes() -> list[int]:
    mod = _make_cpu_module()
    size = {"float32": 4, "bfloat16": 2}
    per_round = [r * c * size[d] for r, c, d in mod.COPIES] + [1024 * 1024 * 4]
    return per_round


@pytest.mark.parametrize("source", ["recorded", "fixture"])
def test_cpu_trace_bytes_from_shapes(source: str, recorded_cpu_trace: Path) -> None:
    path = recorded_cpu_trace if source == "recorded" else fixture_path("traces/cpu/copies.json.gz")
    t = read_trace(path)
    assert not t.has_gpu and not t.has_gpu_activity
    sizes = [c.bytes for c in t.copies]
    expected = _expected_cpu_copy_bytes()
    # every copy_ we issued is there with its exact byte count, in order, per round
    it = iter(sizes)
    for _ in range(_make_cpu_module().REPEATS):
        for want in expected:
            assert any(got == want for got in it), (want, sizes)
    for c in t.copies:
        assert c.direction == "H2H" and c.direction_inferred and c.link_inferred
        assert c.source == "cpu" and c.blocking is True and c.host_us == c.dur_us
    assert any("bandwidth rule" in w for w in t.info.warnings)
    s = summarize(t)
    assert s.inferred and s.rule and "200 GB/s" in s.rule
    assert s.overlap_fraction is None and s.kernels == 0
    assert s.blocking_us == pytest.approx(s.copy_time_us)


def test_cpu_trace_bandwidth_rule_is_configurable(recorded_cpu_trace: Path) -> None:
    default = read_trace(recorded_cpu_trace)
    assert all(c.link == PCIE for c in default.copies if (c.gbps or 0) <= 200)
    tiny = read_trace(recorded_cpu_trace, hbm_threshold_gbps=1e-6)
    assert all(c.link == ON_DEVICE for c in tiny.copies if c.gbps)
    s = summarize(tiny)
    assert ON_DEVICE in s.by_link and s.rule and "1e-06 GB/s" in s.rule


def test_nested_copy_is_counted_once(recorded_cpu_trace: Path) -> None:
    # .to(float16) is aten::to -> aten::_to_copy -> aten::copy_: one copy of the 4 MiB source
    t = read_trace(recorded_cpu_trace)
    assert all(c.op == "aten::copy_" for c in t.copies)
    starts = [c.start_us for c in t.copies]
    assert len(starts) == len(set(starts))


def test_tensor_bytes() -> None:
    assert tensor_bytes([1024, 1024], "float") == 4 << 20
    assert tensor_bytes([3, 5], "c10::BFloat16") == 30
    assert tensor_bytes([], "double") == 8
    assert tensor_bytes([2, 2], "mystery") is None
    assert tensor_bytes("2x2", "float") is None


# --------------------------------------------------------------------------------------
# Truncated and malformed files: a clear message, and what was readable


def test_truncated_json_keeps_events_before_the_cut(tmp_path: Path) -> None:
    text = _plain_text("traces/h200/good.json.gz")
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


def test_truncated_gzip(tmp_path: Path) -> None:
    raw = fixture_path("traces/h200/bad.json.gz").read_bytes()
    p = tmp_path / "bad.json.gz"
    p.write_bytes(raw[: len(raw) * 2 // 3])
    t = read_trace(p)
    assert t.info.truncated
    assert any("gzip stream ends early" in w for w in t.info.warnings)
    assert t.info.events_read > 0


def test_damaged_event_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    text = _plain_text("traces/h200/bad.json.gz")
    i = text.index('"cat": "kernel"')
    damaged = text[:i] + '"cat": kernel oops' + text[i + len('"cat": "kernel"') :]
    p = tmp_path / "damaged.json"
    p.write_text(damaged)
    t = read_trace(p)
    assert not t.info.truncated and t.info.events_skipped >= 1 and not t.info.complete
    assert any("damaged event skipped" in w and "line" in w for w in t.info.warnings)
    assert len(t.copies) == 4 and len(t.kernels) == 15


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "no trace data"),
        (b"hello, world", "not a Chrome trace"),
        (b'{"foo": 1}', "traceEvents"),
        (b"\x00\x01\x02garbage", "not a Chrome trace"),
        (b"42", "neither an object nor an array"),
    ],
)
def test_not_a_trace(tmp_path: Path, content: bytes, words: str) -> None:
    p = tmp_path / "x.json"
    p.write_bytes(content)
    with pytest.raises(ParseError) as err:
        read_trace(p)
    assert words in str(err.value) and str(p) in str(err.value)


def test_missing_and_nsys_rep(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_trace(tmp_path / "nope.json")
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"x")
    with pytest.raises(InputError, match="nsys export --type sqlite"):
        read_trace(rep)


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


# Hypothesis: any cut or byte damage of a real trace reads or fails with ParseError.
_TEXT = gzip.decompress(fixture_path("traces/h200/good.json.gz").read_bytes())
_GZ = fixture_path("traces/h200/bad.json.gz").read_bytes()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cut=st.integers(min_value=0, max_value=len(_TEXT)),
    flips=st.lists(
        st.tuples(st.integers(min_value=0, max_value=len(_TEXT) - 1), st.integers(0, 255)),
        max_size=6,
    ),
    gz=st.booleans(),
)
def test_fuzz_mutations_never_crash(cut: int, flips: list[tuple[int, int]], gz: bool) -> None:
    data = bytearray(_GZ[: max(cut % len(_GZ), 1)]) if gz else bytearray(_TEXT[:cut])
    for pos, value in flips:
        if data:
            data[pos % len(data)] = value
    try:
        t = parse_chrome_bytes(bytes(data), "fuzz")
    except GpulaneError:
        return
    s = summarize(t)
    assert s.copies == len(t.copies)
    for c in t.copies:
        assert c.dur_us >= 0


# --------------------------------------------------------------------------------------
# Nsight Systems SQLite export (schema of `nsys export --type sqlite`, built here)


def make_nsys_sqlite(path: Path, with_runtime: bool = True) -> None:
    """A small SQLite file with the tables and columns `nsys export --type sqlite` writes
    (CUPTI_ACTIVITY_KIND_MEMCPY / _KERNEL / _RUNTIME, StringIds, ENUM_CUDA_MEMCPY_OPER,
    ENUM_CUDA_MEM_KIND); times in ns."""
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
        CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
            start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
            contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
            globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
            deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,
            srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,
            migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
            start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
            contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
            globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL,
            gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER,
            blockZ INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
            start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
            globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
            returnValue INTEGER NOT NULL, callchainId INTEGER);
        INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES
            (0, 'CUDA_MEMCPY_OPER_UNKNOWN', 'Unknown'),
            (1, 'CUDA_MEMCPY_OPER_HTOD', 'Host-to-Device'),
            (2, 'CUDA_MEMCPY_OPER_DTOH', 'Device-to-Host'),
            (8, 'CUDA_MEMCPY_OPER_DTOD', 'Device-to-Device'),
            (10, 'CUDA_MEMCPY_OPER_PTOP', 'Peer-to-Peer');
        INSERT INTO ENUM_CUDA_MEM_KIND VALUES
            (0, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', 'Unknown'),
            (1, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),
            (2, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'),
            (3, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device');
        INSERT INTO StringIds VALUES (1, 'cudaMemcpy_v3020'), (2, 'cudaMemcpyAsync_v3020'),
            (3, 'gemm_kernel'), (4, 'void gemm_kernel<float>(float*)');
        """
    )
    # (start, end, device, stream, corr, bytes, copyKind, srcKind, dstKind, srcDev, dstDev)
    memcpys = [
        (1_000_000, 2_000_000, 0, 7, 10, 10_000_000, 1, 1, 3, 0, 0),  # H2D pageable 10 GB/s
        (3_000_000, 3_200_000, 0, 13, 11, 10_000_000, 1, 2, 3, 0, 0),  # H2D pinned 50 GB/s
        (4_000_000, 4_400_000, 0, 13, 12, 20_000_000, 2, 3, 2, 0, 0),  # D2H pinned 50 GB/s
        (5_000_000, 5_010_000, 0, 7, 13, 10_000_000, 8, 3, 3, 0, 0),  # D2D 1000 GB/s
        (6_000_000, 6_050_000, 0, 13, 14, 20_000_000, 10, 3, 3, 0, 1),  # P2P 400 GB/s
    ]
    for s, e, dev, stream, corr, nbytes, kind, sk, dk, sd, dd in memcpys:
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId,"
            " correlationId, bytes, copyKind, srcKind, dstKind, srcDeviceId, dstDeviceId)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (s, e, dev, 1, stream, corr, nbytes, kind, sk, dk, sd, dd),
        )
    if with_runtime:
        runtime = [
            (900_000, 2_050_000, 10, 1),  # cudaMemcpy: synchronous, host waited
            (2_990_000, 3_000_000, 11, 2),  # async, returned at once
            (3_990_000, 4_000_000, 12, 2),
            (4_990_000, 5_000_000, 13, 2),
            (5_990_000, 6_000_000, 14, 2),
        ]
        for s, e, corr, name in runtime:
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, correlationId,"
                " nameId, returnValue) VALUES (?,?,?,?,?,0)",
                (s, e, 1, corr, name),
            )
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId,"
        " demangledName, shortName) VALUES (3100000, 4100000, 0, 1, 7, 4, 3)"
    )
    con.commit()
    con.close()


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


# --------------------------------------------------------------------------------------
# Pure helpers


def _copy(nbytes: int, dur_us: float, start: float = 0.0) -> CopyEvent:
    return CopyEvent("c", "H2D", PCIE, start, dur_us, nbytes)


def test_histogram_bins() -> None:
    copies = [
        _copy(1000, 1.0),
        _copy(10_000, 1.0),
        _copy(60_000, 1.0),
        _copy(300_000, 1.0),
        _copy(10, 0.0),
    ]
    bins = {b.label: b for b in histogram(copies)}
    assert bins["0-5"].count == 1 and bins["5-20"].count == 1  # 1000 B in 1 us = 1 GB/s
    assert sum(b.count for b in bins.values()) == 4  # the zero-duration copy has no bandwidth
    assert bins["50-80"].bytes == 60_000 and bins["200-500"].time_us == 1.0


def test_union_and_overlap() -> None:
    assert union_length([(0, 2), (1, 3), (5, 6)]) == 4
    assert union_length([]) == 0
    assert overlap_length([(0, 10)], [(2, 3), (2.5, 4), (9, 12)]) == 3
    assert overlap_length([(0, 1)], []) == 0


def test_decompress_plain_and_probe() -> None:
    assert decompress(b"abc", "x") == (b"abc", [], False)
    data, _warnings, truncated = decompress(gzip.compress(b"abc") + gzip.compress(b"def"), "x")
    assert data == b"abcdef" and not truncated
    rate, source = probe_line_rate(0)
    assert rate is None or (rate > 0 and source)


def test_readinfo_complete() -> None:
    info = ReadInfo("p", "torch-chrome", 1, 1)
    assert info.complete
    info.truncated = True
    assert not info.complete
