"""The captured traces of tests/fixtures/traces, and the Nsight Systems SQLite schema,
shared by the trace tests."""

from __future__ import annotations

import gzip
import importlib.util
import sqlite3
from pathlib import Path
from types import ModuleType

from gpulane.analysis.trace.events import Trace
from gpulane.analysis.trace.read import read_trace
from gpulane.analysis.trace.summary import Summary, summarize
from tests.conftest import fixture_path

LAYER_BYTES = 2048 * 2048 * 2  # one bf16 2048x2048 weight of the offload demo (--small)


def bad_trace() -> Trace:
    return read_trace(fixture_path("traces/h200/bad.json.gz"))


def good_trace() -> Trace:
    return read_trace(fixture_path("traces/h200/good.json.gz"))


def plain_text(name: str) -> str:
    return gzip.decompress(fixture_path(name).read_bytes()).decode()


def make_cpu_module() -> ModuleType:
    """tests/fixtures/traces/make_cpu_trace.py, which records the CPU fixture."""
    path = fixture_path("traces/make_cpu_trace.py")
    spec = importlib.util.spec_from_file_location("make_cpu_trace", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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


def pair() -> tuple[Trace, Trace, Summary, Summary]:
    """The offload demo done badly and done well, summarized against a 63 GB/s line rate."""
    b, g = bad_trace(), good_trace()
    return b, g, summarize(b, 63.0, "test"), summarize(g, 63.0, "test")
