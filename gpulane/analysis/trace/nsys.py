"""Nsight Systems SQLite exports (``nsys export --type sqlite``): copies and kernels.

Copies come from CUPTI_ACTIVITY_KIND_MEMCPY (direction from copyKind, memory kinds from
srcKind/dstKind, names from the export's own ENUM tables where it has them), kernels from
CUPTI_ACTIVITY_KIND_KERNEL, and whether the host waited from the CUDA runtime call of the
same correlation id. Times in the export are nanoseconds; a Trace holds microseconds.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

from gpulane.analysis.trace.events import (
    DEFAULT_HBM_THRESHOLD_GBPS,
    LINK_OF,
    PCIE,
    CopyEvent,
    Kernel,
    ReadInfo,
    Trace,
    host_waited,
)
from gpulane.analysis.trace.fields import integer, memory_kind, number
from gpulane.errors import ParseError

SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_BYTES = 100

# CUPTI's copyKind and memory kind numbers, for exports that lack the ENUM tables.
_COPY_KIND_DEFAULT = {1: "H2D", 2: "D2H", 8: "D2D", 9: "H2H", 10: "P2P"}
_MEM_KIND_DEFAULT = {
    0: None,
    1: "pageable",
    2: "pinned",
    3: "device",
    4: "array",
    5: "managed",
    6: "device",
    7: "managed",
}


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _enum(con: sqlite3.Connection, tables: set[str], table: str) -> dict[int, str]:
    if table not in tables:
        return {}
    cols = _columns(con, table)
    text_cols = [c for c in ("name", "label") if c in cols]
    if "id" not in cols or not text_cols:
        return {}
    out = {}
    for row in con.execute(f"SELECT id, {', '.join(text_cols)} FROM {table}"):
        out[int(row[0])] = " ".join(str(x) for x in row[1:] if x is not None)
    return out


def _copy_kind_from_enum(text: str) -> str | None:
    t = text.upper().replace("-", "").replace("_", "").replace(" ", "")
    for key, kind in (
        ("PTOP", "P2P"),
        ("PEERTOPEER", "P2P"),
        ("HTOD", "H2D"),
        ("HOSTTODEVICE", "H2D"),
        ("DTOH", "D2H"),
        ("DEVICETOHOST", "D2H"),
        ("DTOD", "D2D"),
        ("DEVICETODEVICE", "D2D"),
        ("HTOH", "H2H"),
        ("HOSTTOHOST", "H2H"),
    ):
        if key in t:
            return kind
    return None


def read_nsys_sqlite(
    path: str | Path, hbm_threshold_gbps: float = DEFAULT_HBM_THRESHOLD_GBPS
) -> Trace:
    """Copies and kernels of an Nsight Systems SQLite export (``nsys export --type sqlite``)."""
    src = str(path)
    size = Path(path).stat().st_size
    with open(path, "rb") as fh:
        _check_whole(fh.read(_HEADER_BYTES), size, src)
    info = ReadInfo(path=src, format="nsys-sqlite", size_bytes=size, bytes_read=size)
    try:
        con = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise ParseError(f"cannot open as SQLite: {err}", src) from err
    try:
        return _read_nsys(con, info, hbm_threshold_gbps)
    except sqlite3.DatabaseError as err:
        raise ParseError(
            f"not a readable Nsight Systems SQLite export ({err}); export it again with "
            f"`nsys export --type sqlite`",
            src,
        ) from err
    finally:
        con.close()


def looks_like_sqlite(head: bytes) -> bool:
    """Whether a file's first bytes are (the start of) SQLite's magic string; a file cut
    inside those 16 bytes still goes to this reader, which says it was cut."""
    return len(head) >= 6 and (head.startswith(SQLITE_MAGIC[:15]) or SQLITE_MAGIC.startswith(head))


def _check_whole(header: bytes, size: int, src: str) -> None:
    """A file shorter than its SQLite header says is cut off. SQLite itself reads the
    missing pages as zeros, which gives rows of NULLs or "malformed" halfway through a
    query, so the size is checked before anything is read."""
    again = "; copy or export it again (`nsys export --type sqlite`)"
    if len(header) < _HEADER_BYTES:
        raise ParseError(f"SQLite file cut off inside its {_HEADER_BYTES}-byte header{again}", src)
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The header's page count is valid only when its change counter matches the
    # version-valid-for number (SQLite >= 3.7.0 keeps them equal); else it is not known.
    if pages and header[24:28] == header[92:96] and size < pages * page_size:
        raise ParseError(
            f"SQLite file cut off: {size} of the {pages * page_size} bytes its header "
            f"declares{again}",
            src,
        )


def _read_nsys(con: sqlite3.Connection, info: ReadInfo, threshold: float) -> Trace:
    tables = _tables(con)
    if "CUPTI_ACTIVITY_KIND_MEMCPY" not in tables and "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        raise ParseError(
            "no CUPTI_ACTIVITY_KIND_MEMCPY or CUPTI_ACTIVITY_KIND_KERNEL table: was the "
            "profile taken with CUDA tracing (nsys profile -t cuda)?",
            info.path,
        )
    kinds = {
        k: _copy_kind_from_enum(v) for k, v in _enum(con, tables, "ENUM_CUDA_MEMCPY_OPER").items()
    }
    mems_text = _enum(con, tables, "ENUM_CUDA_MEM_KIND")
    mems = {k: memory_kind(v.split()[-1] if v.split() else None) for k, v in mems_text.items()}
    for k, v in mems_text.items():
        for word in ("pageable", "pinned", "device", "managed", "array"):
            if word in v.lower():
                mems[k] = word
                break
    strings: dict[int, str] = {}
    if "StringIds" in tables:
        strings = {int(i): str(v) for i, v in con.execute("SELECT id, value FROM StringIds")}
    runtime: dict[int, tuple[float, float, str]] = {}
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        cols = _columns(con, "CUPTI_ACTIVITY_KIND_RUNTIME")
        if {"start", "end", "correlationId"} <= cols:
            name_col = "nameId" if "nameId" in cols else ("name" if "name" in cols else None)
            q = f"SELECT start, end, correlationId{', ' + name_col if name_col else ''} FROM CUPTI_ACTIVITY_KIND_RUNTIME"
            for row in con.execute(q):
                rt_start, rt_end, corr = number(row[0]), number(row[1]), integer(row[2])
                if rt_start is None or rt_end is None or corr is None:
                    continue  # a call with no time or id cannot be joined to a copy
                nm = row[3] if name_col else ""
                if isinstance(nm, int):
                    nm = strings.get(nm, str(nm))
                runtime[corr] = (rt_start / 1e3, rt_end / 1e3, str(nm or ""))

    copies: list[CopyEvent] = []
    t_min, t_max = math.inf, -math.inf
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        cols = _columns(con, "CUPTI_ACTIVITY_KIND_MEMCPY")
        need = {"start", "end", "bytes", "copyKind"}
        if not need <= cols:
            raise ParseError(
                f"CUPTI_ACTIVITY_KIND_MEMCPY lacks columns {sorted(need - cols)}", info.path
            )
        opt = [
            c
            for c in (
                "srcKind",
                "dstKind",
                "streamId",
                "deviceId",
                "correlationId",
                "srcDeviceId",
                "dstDeviceId",
            )
            if c in cols
        ]
        q = f"SELECT start, end, bytes, copyKind{''.join(', ' + c for c in opt)} FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start"
        for row in con.execute(q):
            info.events_read += 1
            r = dict(zip(["start", "end", "bytes", "copyKind", *opt], row, strict=False))
            start, end = number(r["start"]), number(r["end"])
            if start is None or end is None or end < start:
                info.events_skipped += 1
                continue
            ck = integer(r["copyKind"])
            direction = kinds.get(ck) if ck is not None and ck in kinds else None
            if direction is None and ck is not None:
                direction = _COPY_KIND_DEFAULT.get(ck)
            inferred = direction is None
            direction = direction or "H2D/D2H"
            device = integer(r.get("deviceId"))
            src_dev, dst_dev = integer(r.get("srcDeviceId")), integer(r.get("dstDeviceId"))
            if (
                direction == "D2D"
                and src_dev is not None
                and dst_dev is not None
                and src_dev != dst_dev
            ):
                direction = "P2P"
            src_mem = mems.get(
                integer(r.get("srcKind")) or 0,
                _MEM_KIND_DEFAULT.get(integer(r.get("srcKind")) or 0),
            )
            dst_mem = mems.get(
                integer(r.get("dstKind")) or 0,
                _MEM_KIND_DEFAULT.get(integer(r.get("dstKind")) or 0),
            )
            s_us, d_us = start / 1e3, (end - start) / 1e3
            t_min, t_max = min(t_min, s_us), max(t_max, s_us + d_us)
            blocking: bool | None = None
            reason = None
            host_us = None
            rt = runtime.get(integer(r.get("correlationId")) or -1)
            if rt is not None:
                rt_start, rt_end, rt_name = rt
                host_us = rt_end - rt_start
                blocking, reason = host_waited(rt_name, rt_end, s_us + d_us)
            copies.append(
                CopyEvent(
                    name=f"memcpy {direction}",
                    direction=direction,
                    link=LINK_OF.get(direction, PCIE),
                    start_us=s_us,
                    dur_us=d_us,
                    bytes=integer(r["bytes"]),
                    direction_inferred=inferred,
                    link_inferred=inferred,
                    blocking=blocking,
                    blocking_reason=reason,
                    host_us=host_us,
                    stream=integer(r.get("streamId")),
                    device=device if device is not None else src_dev,
                    peer_device=dst_dev if direction == "P2P" else None,
                    src_memory=src_mem,
                    dst_memory=dst_mem,
                    source="gpu",
                )
            )
    kernels: list[Kernel] = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        cols = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
        if {"start", "end"} <= cols:
            kopt = [c for c in ("deviceId", "streamId", "shortName", "demangledName") if c in cols]
            q = f"SELECT start, end{''.join(', ' + c for c in kopt)} FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start"
            for row in con.execute(q):
                info.events_read += 1
                r = dict(zip(["start", "end", *kopt], row, strict=False))
                start, end = number(r["start"]), number(r["end"])
                if start is None or end is None or end < start:
                    info.events_skipped += 1
                    continue
                nm = r.get("shortName", r.get("demangledName"))
                kernels.append(
                    Kernel(
                        name=strings.get(nm, str(nm)) if isinstance(nm, int) else str(nm or ""),
                        start_us=start / 1e3,
                        dur_us=(end - start) / 1e3,
                        device=integer(r.get("deviceId")),
                        stream=integer(r.get("streamId")),
                    )
                )
                t_min, t_max = min(t_min, start / 1e3), max(t_max, end / 1e3)
    if info.events_skipped:
        info.warnings.append(f"{info.events_skipped} rows skipped: missing or reversed start/end")
    if copies and not runtime:
        info.warnings.append(
            "no CUPTI_ACTIVITY_KIND_RUNTIME table: whether the host waited for each copy is unknown"
        )
    return Trace(
        info=info,
        copies=copies,
        kernels=kernels,
        has_gpu_activity=bool(copies or kernels),
        has_gpu=True,
        span_us=(t_max - t_min) if t_max > t_min else 0.0,
        hbm_threshold_gbps=threshold,
    )
