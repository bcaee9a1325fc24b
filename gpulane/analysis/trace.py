"""Copy bandwidth from profiler traces: what an offloading program really got from its links.

Reads torch.profiler (kineto) Chrome-trace JSON, plain or gzipped and possibly cut off,
and Nsight Systems SQLite exports (``nsys export --type sqlite``). Every copy becomes a
:class:`CopyEvent` with its direction, bytes, duration, effective bandwidth, whether the
host waited for it (blocking) and its stream; :func:`summarize` turns a trace into totals,
a bandwidth histogram, the bytes-weighted bandwidth against the path's line rate, the
host time spent blocked on copies, and the overlap of copies with compute kernels.

Where the trace has GPU memcpy activity (kineto ``gpu_memcpy`` events, nsys
``CUPTI_ACTIVITY_KIND_MEMCPY``), direction and link come from the event kind. Where it
only has CPU-side ops (``aten::copy_``), bytes come from the recorded shapes
(``record_shapes=True``) and the link is inferred by a stated bandwidth rule: above
``hbm_threshold_gbps`` (default 200 GB/s) a copy is counted as on-device (HBM), below
it as PCIe; such copies are marked ``inferred``.

Everything here is a pure function of the file's bytes except :func:`read_trace`, which
opens the file, and :func:`probe_line_rate`, which asks the live topology.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
import re
import sqlite3
import statistics
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.errors import InputError, ParseError
from gpulane.record import Row

DEFAULT_HBM_THRESHOLD_GBPS = 200.0
# Bin edges in GB/s; the last bin is open. Chosen so that pageable PCIe (≈ 5-20),
# pinned PCIe Gen4/Gen5 (≈ 20-50 / 50-80) and HBM (> 200) land in different bins.
DEFAULT_BINS_GBPS: tuple[float, ...] = (0.0, 5.0, 20.0, 50.0, 80.0, 200.0, 500.0, 1000.0)

PCIE, ON_DEVICE, PEER, HOST = "pcie", "on-device", "peer", "host"
LINKS = (PCIE, ON_DEVICE, PEER, HOST)
DIRECTIONS = ("H2D", "D2H", "D2D", "P2P", "H2H", "H2D/D2H")

# Element sizes for the "Input type" strings torch.profiler records.
_ELEMENT_SIZE = {
    "bool": 1,
    "unsigned char": 1,
    "signed char": 1,
    "char": 1,
    "short": 2,
    "short int": 2,
    "int": 4,
    "long": 8,
    "long int": 8,
    "long long": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "float": 4,
    "double": 8,
    "c10::complex<c10::Half>": 4,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1,
    "c10::quint8": 1,
    "c10::qint8": 1,
    "c10::qint32": 4,
    "unsigned short": 2,
    "unsigned int": 4,
    "unsigned long": 8,
}

_CPU_COPY_OPS = ("aten::copy_",)
_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
_MEMCPY_NAME = re.compile(
    r"Memcpy\s+(HtoD|DtoH|DtoD|PtoP|HtoH)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.I
)
_KIND_FROM_NAME = {"htod": "H2D", "dtoh": "D2H", "dtod": "D2D", "ptop": "P2P", "htoh": "H2H"}
_LINK_OF = {"H2D": PCIE, "D2H": PCIE, "D2D": ON_DEVICE, "P2P": PEER, "H2H": HOST}


# --------------------------------------------------------------------------------------
# Data model


@dataclass
class CopyEvent:
    """One copy. Times in microseconds from the trace's own clock; bytes as moved."""

    name: str
    direction: str  # one of DIRECTIONS
    link: str  # one of LINKS
    start_us: float
    dur_us: float
    bytes: int | None
    direction_inferred: bool = False
    link_inferred: bool = False
    blocking: bool | None = None  # the host thread waited for this copy
    blocking_reason: str | None = None
    host_us: float | None = None  # host time of the call that issued it (the wait, if blocking)
    stream: int | str | None = None
    device: int | None = None
    peer_device: int | None = None
    src_memory: str | None = None  # pageable, pinned, device, managed
    dst_memory: str | None = None
    op: str | None = None  # aten op that issued it
    thread: int | str | None = None
    source: str = "gpu"  # gpu: a GPU memcpy activity; cpu: a host-side op only

    @property
    def gbps(self) -> float | None:
        if self.bytes is None or self.dur_us <= 0:
            return None
        return self.bytes / (self.dur_us * 1e3)

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["gbps"] = self.gbps
        return d


@dataclass
class Kernel:
    name: str
    start_us: float
    dur_us: float
    device: int | None = None
    stream: int | str | None = None


@dataclass
class ReadInfo:
    """What was read from a file, and what could not be."""

    path: str
    format: str  # "torch-chrome" or "nsys-sqlite"
    size_bytes: int
    bytes_read: int  # bytes of (decompressed) text that events were read from
    events_read: int = 0
    events_skipped: int = 0
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.truncated and self.events_skipped == 0


@dataclass
class Trace:
    info: ReadInfo
    copies: list[CopyEvent]
    kernels: list[Kernel]
    has_gpu_activity: bool  # the trace has GPU-side copy or kernel events
    has_gpu: bool  # the trace came from a process with a GPU (device properties, CUDA calls)
    span_us: float = 0.0
    hbm_threshold_gbps: float = DEFAULT_HBM_THRESHOLD_GBPS
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return Path(self.info.path).name


def link_rule_text(threshold_gbps: float) -> str:
    return (
        f"copies seen only as host-side ops: above {threshold_gbps:g} GB/s counted as "
        f"on-device (HBM), at or below as PCIe (--hbm-threshold-gbps to change)"
    )


# --------------------------------------------------------------------------------------
# Reading bytes: gzip (possibly truncated) and the Chrome-trace JSON (possibly cut off)


def decompress(raw: bytes, source: str) -> tuple[bytes, list[str], bool]:
    """Plain bytes of a file that may be gzip-compressed; (data, warnings, truncated).

    A gzip stream that ends early or is corrupt keeps everything decompressed before
    the damage.
    """
    if raw[:2] != b"\x1f\x8b":
        return raw, [], False
    out: list[bytes] = []
    warnings: list[str] = []
    truncated = False
    rest = raw
    consumed = 0
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = 1 << 16
        pos = 0
        try:
            while pos < len(rest) and not d.eof:
                out.append(d.decompress(rest[pos : pos + chunk]))
                pos += chunk
            out.append(d.flush())
        except zlib.error as err:
            warnings.append(
                f"gzip data is corrupt after about {consumed + pos} of {len(raw)} compressed "
                f"bytes ({err}); kept what decompressed before it"
            )
            truncated = True
            break
        if not d.eof:
            warnings.append(
                f"gzip stream ends early (file cut off at {len(raw)} compressed bytes); "
                f"kept what decompressed"
            )
            truncated = True
            break
        consumed += len(rest) - len(d.unused_data)
        rest = d.unused_data
        if rest and rest[:2] != b"\x1f\x8b":
            break  # trailing garbage after the last member
    if not out or not any(out):
        if truncated:
            return b"", warnings, True
        raise ParseError("gzip file holds no data", source)
    return b"".join(out), warnings, truncated


_EVENTS_KEY = re.compile(r'"traceEvents"\s*:\s*\[')
_RESYNC = re.compile(r"\}\s*,\s*(?=\{)")


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def parse_chrome_json(
    text: str, source: str = "<text>"
) -> tuple[dict[str, Any], list[Any], list[str], bool, int]:
    """Top-level fields and events of a Chrome trace that may be cut off or damaged.

    Returns (meta, events, warnings, truncated, chars_used). A whole, valid file is read
    with ``json.loads``; otherwise events are read one by one from the ``traceEvents``
    array, keeping every complete event before a cut and skipping damaged ones.
    """
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        doc = None
    if isinstance(doc, dict):
        listed = doc.get("traceEvents")
        if not isinstance(listed, list):
            raise ParseError('not a Chrome trace: no "traceEvents" array', source)
        meta = {k: v for k, v in doc.items() if k != "traceEvents"}
        return meta, listed, [], False, len(text)
    if isinstance(doc, list):
        return {}, doc, [], False, len(text)
    if doc is not None:
        raise ParseError("not a Chrome trace: the JSON is neither an object nor an array", source)

    stripped = text.lstrip()
    m = _EVENTS_KEY.search(text)
    if m:
        start = m.end()
    elif stripped.startswith("["):
        start = len(text) - len(stripped) + 1
    else:
        snippet = stripped[:60].replace("\n", " ")
        raise ParseError(
            f'not a Chrome trace: no "traceEvents" array found (starts with {snippet!r})',
            source,
            1,
        )
    meta = _salvage_meta(text, m.start() if m else 0)
    decoder = json.JSONDecoder()
    events: list[Any] = []
    warnings: list[str] = []
    truncated = False
    damaged = 0
    pos = start
    n = len(text)
    last_good = start
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n:
            truncated = True
            break
        if text[pos] == "]":
            break
        try:
            obj, end = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            nxt = _RESYNC.search(text, pos)
            if nxt is None:
                truncated = True
                break
            damaged += 1
            warnings.append(
                f"line {_line_of(text, pos)}: damaged event skipped (not valid JSON); "
                f"reading went on at line {_line_of(text, nxt.end())}"
            )
            pos = nxt.end()
            continue
        events.append(obj)
        pos = end
        last_good = end
    if truncated:
        warnings.append(
            f"file ends inside the event list (cut off at line {_line_of(text, n)}): read "
            f"{len(events)} complete events from the first {last_good} of {n} characters"
        )
    if damaged > 5:
        shown = [w for w in warnings if "damaged event" in w][:5]
        others = [w for w in warnings if "damaged event" not in w]
        warnings[:] = [*shown, f"{damaged} damaged events skipped in all", *others]
    return meta, events, warnings, truncated, last_good


def _salvage_meta(text: str, limit: int) -> dict[str, Any]:
    """Top-level fields written before the event list (kineto writes deviceProperties there)."""
    meta: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    for key in ("deviceProperties", "schemaVersion", "displayTimeUnit", "cuda_runtime_version"):
        m = re.search(rf'"{key}"\s*:\s*', text[: limit or len(text)])
        if not m:
            continue
        try:
            meta[key], _ = decoder.raw_decode(text, m.end())
        except json.JSONDecodeError:
            continue
    return meta


# --------------------------------------------------------------------------------------
# Chrome trace -> copies and kernels


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _int(value: Any) -> int | None:
    f = _num(value)
    return None if f is None or f != int(f) else int(f)


def _args(ev: dict[str, Any]) -> dict[str, Any]:
    a = ev.get("args")
    return a if isinstance(a, dict) else {}


def element_size(type_name: str) -> int | None:
    return _ELEMENT_SIZE.get(type_name.strip())


def tensor_bytes(dims: Any, type_name: Any) -> int | None:
    """numel × element size from a profiler "Input Dims" entry and its "Input type"."""
    if not isinstance(dims, list) or not isinstance(type_name, str):
        return None
    size = element_size(type_name)
    if size is None:
        return None
    numel = 1
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            return None
        numel *= d
    return numel * size


def _cpu_copy_bytes(args: dict[str, Any]) -> int | None:
    """Bytes of an aten::copy_(self, src, non_blocking): the source tensor's size."""
    dims = args.get("Input Dims")
    types = args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    for i in (1, 0):  # src, then self (same numel; dtype may differ)
        if i < len(dims) and i < len(types):
            b = tensor_bytes(dims[i], types[i])
            if b is not None:
                return b
    return None


def _non_blocking(args: dict[str, Any]) -> bool | None:
    """The non_blocking argument of aten::copy_, from "Concrete Inputs" when recorded."""
    ci = args.get("Concrete Inputs")
    if isinstance(ci, list) and len(ci) >= 3:
        v = str(ci[2]).strip().lower()
        if v in ("true", "1"):
            return True
        if v in ("false", "0"):
            return False
    return None


def _memory_kind(word: str | None) -> str | None:
    if not word:
        return None
    w = word.lower()
    for kind in ("pageable", "pinned", "device", "managed", "array"):
        if w.startswith(kind):
            return kind
    return w


@dataclass
class _Span:
    start: float
    end: float
    ev: dict[str, Any]


class _Nesting:
    """Which host events lie inside which, per thread (for "sync inside this copy_")."""

    def __init__(self, events: Iterable[tuple[Any, float, float, dict[str, Any]]]) -> None:
        self.by_thread: dict[Any, tuple[list[float], list[_Span]]] = {}
        tmp: dict[Any, list[_Span]] = {}
        for key, s, e, ev in events:
            tmp.setdefault(key, []).append(_Span(s, e, ev))
        for key, spans in tmp.items():
            spans.sort(key=lambda sp: sp.start)
            self.by_thread[key] = ([sp.start for sp in spans], spans)

    def inside(self, key: Any, start: float, end: float) -> list[_Span]:
        got = self.by_thread.get(key)
        if not got:
            return []
        starts, spans = got
        i = bisect.bisect_left(starts, start)
        out = []
        while i < len(spans) and spans[i].start <= end:
            if spans[i].end <= end + 1e-6:
                out.append(spans[i])
            i += 1
        return out


def copies_from_chrome(
    events: Sequence[Any],
    meta: dict[str, Any],
    info: ReadInfo,
    hbm_threshold_gbps: float = DEFAULT_HBM_THRESHOLD_GBPS,
) -> Trace:
    """Copies and kernels of a kineto Chrome trace's events."""
    cpu_ops: list[dict[str, Any]] = []
    runtime: list[dict[str, Any]] = []
    gpu_copies: list[dict[str, Any]] = []
    kernels: list[Kernel] = []
    skipped = 0
    t_min, t_max = math.inf, -math.inf
    for ev in events:
        if not isinstance(ev, dict):
            skipped += 1
            continue
        if ev.get("ph") != "X":
            continue
        ts, dur = _num(ev.get("ts")), _num(ev.get("dur"))
        if ts is None or dur is None or dur < 0:
            skipped += 1
            continue
        cat = str(ev.get("cat", "")).lower()
        if cat in ("trace", "overhead", "python_function", "user_annotation"):
            continue
        t_min, t_max = min(t_min, ts), max(t_max, ts + dur)
        if cat == "gpu_memcpy":
            gpu_copies.append(ev)
        elif cat == "kernel":
            a = _args(ev)
            kernels.append(
                Kernel(
                    name=str(ev.get("name", "")),
                    start_us=ts,
                    dur_us=dur,
                    device=_int(a.get("device")),
                    stream=a.get("stream", ev.get("tid")),
                )
            )
        elif cat in ("cuda_runtime", "cuda_driver"):
            runtime.append(ev)
        elif cat == "cpu_op":
            cpu_ops.append(ev)
    info.events_skipped += skipped
    if skipped:
        info.warnings.append(f"{skipped} events skipped: not an object, or no usable ts/dur")

    devprops = meta.get("deviceProperties")
    has_gpu = bool(devprops) or bool(runtime) or bool(gpu_copies) or bool(kernels)
    has_gpu_activity = bool(gpu_copies) or bool(kernels)

    # External id -> the innermost aten::copy_ issuing it; correlation -> runtime call.
    copy_ops_by_ext: dict[int, dict[str, Any]] = {}
    for op in cpu_ops:
        if op.get("name") in _CPU_COPY_OPS:
            ext = _int(_args(op).get("External id"))
            if ext is not None:
                copy_ops_by_ext[ext] = op
    runtime_by_corr: dict[int, dict[str, Any]] = {}
    syncs_by_ext: dict[int, list[dict[str, Any]]] = {}
    for rt in runtime:
        a = _args(rt)
        corr = _int(a.get("correlation"))
        if corr is not None:
            runtime_by_corr[corr] = rt
        ext = _int(a.get("External id"))
        if ext is not None and str(rt.get("name", "")).startswith(_SYNC_CALLS):
            syncs_by_ext.setdefault(ext, []).append(rt)

    copies: list[CopyEvent] = []
    for ev in gpu_copies:
        copies.append(_gpu_copy(ev, copy_ops_by_ext, runtime_by_corr, syncs_by_ext))
    unknown_bytes = sum(1 for c in copies if c.bytes is None)
    if unknown_bytes:
        info.warnings.append(f"{unknown_bytes} GPU copies carry no byte count")

    seen = {_int(_args(ev).get("correlation")) for ev in gpu_copies}
    orphans = sum(
        1
        for corr, rt in runtime_by_corr.items()
        if str(rt.get("name", "")).startswith("cudaMemcpy") and corr not in seen
    )
    if orphans and gpu_copies:
        info.warnings.append(
            f"{orphans} cudaMemcpy calls have no GPU memcpy event (trace cut off, or GPU "
            f"activity not recorded for them); they are not counted"
        )
    if not gpu_copies:
        copies = _cpu_copies(cpu_ops, runtime, has_gpu, hbm_threshold_gbps, info)

    copies.sort(key=lambda c: c.start_us)
    kernels.sort(key=lambda k: k.start_us)
    span = (t_max - t_min) if t_max > t_min else 0.0
    return Trace(
        info=info,
        copies=copies,
        kernels=kernels,
        has_gpu_activity=has_gpu_activity,
        has_gpu=has_gpu,
        span_us=span,
        hbm_threshold_gbps=hbm_threshold_gbps,
        meta={k: meta[k] for k in ("deviceProperties", "cuda_runtime_version") if k in meta},
    )


def _gpu_copy(
    ev: dict[str, Any],
    copy_ops_by_ext: dict[int, dict[str, Any]],
    runtime_by_corr: dict[int, dict[str, Any]],
    syncs_by_ext: dict[int, list[dict[str, Any]]],
) -> CopyEvent:
    a = _args(ev)
    name = str(ev.get("name", ""))
    ts = float(_num(ev.get("ts")) or 0.0)
    dur = float(_num(ev.get("dur")) or 0.0)
    m = _MEMCPY_NAME.search(name)
    direction, inferred = "H2D/D2H", True
    src_mem = dst_mem = None
    if m:
        direction, inferred = _KIND_FROM_NAME[m.group(1).lower()], False
        src_mem, dst_mem = _memory_kind(m.group(2)), _memory_kind(m.group(3))
    device = _int(a.get("device"))
    peer = None
    for key in ("dst device", "dst_device", "dstDevice"):
        if key in a:
            peer = _int(a.get(key))
    if direction == "D2D" and peer is not None and device is not None and peer != device:
        direction = "P2P"
    nbytes = _int(a.get("bytes"))
    ext = _int(a.get("External id"))
    op = copy_ops_by_ext.get(ext) if ext is not None else None
    if nbytes is None and op is not None:
        nbytes = _cpu_copy_bytes(_args(op))
    if nbytes is None:
        bw = _num(a.get("memory bandwidth (GB/s)"))
        if bw is not None and dur > 0:
            nbytes = round(bw * dur * 1e3)
    rt = runtime_by_corr.get(_int(a.get("correlation")) or -1)
    blocking: bool | None = None
    reason = None
    host_us = None
    if rt is not None:
        host_us = _num(rt.get("dur"))
        rt_name = str(rt.get("name", ""))
        rt_end = float(_num(rt.get("ts")) or 0.0) + float(host_us or 0.0)
        if rt_name.startswith("cudaMemcpy") and "Async" not in rt_name:
            blocking, reason = True, f"{rt_name} (synchronous call)"
        elif rt_end >= ts + dur:
            blocking, reason = True, f"{rt_name} returned after the copy finished"
        else:
            blocking, reason = False, None
    if op is not None:
        oa = _args(op)
        nb = _non_blocking(oa)
        syncs = syncs_by_ext.get(ext, []) if ext is not None else []
        if nb is False or syncs:
            blocking = True
            reason = "non_blocking=False" if nb is False else syncs[0].get("name")
        elif nb is True and blocking is None:
            blocking = False
        if blocking:
            host_us = _num(op.get("dur"))
    stream = a.get("stream", ev.get("tid"))
    return CopyEvent(
        name=name,
        direction=direction,
        link=_LINK_OF.get(direction, PCIE),
        start_us=ts,
        dur_us=dur,
        bytes=nbytes,
        direction_inferred=inferred,
        link_inferred=inferred,
        blocking=blocking,
        blocking_reason=reason,
        host_us=host_us,
        stream=stream,
        device=device,
        peer_device=peer if direction == "P2P" else None,
        src_memory=src_mem,
        dst_memory=dst_mem,
        op=str(op.get("name")) if op is not None else None,
        thread=op.get("tid") if op is not None else None,
        source="gpu",
    )


def _cpu_copies(
    cpu_ops: list[dict[str, Any]],
    runtime: list[dict[str, Any]],
    has_gpu: bool,
    threshold: float,
    info: ReadInfo,
) -> list[CopyEvent]:
    """Copies seen only as host-side aten::copy_ ops (no GPU activity in the trace)."""
    ops = _outermost([op for op in cpu_ops if op.get("name") in _CPU_COPY_OPS])
    syncs = [rt for rt in runtime if str(rt.get("name", "")).startswith(_SYNC_CALLS)]
    nest = _Nesting((rt.get("tid"), float(_num(rt.get("ts")) or 0.0), _end(rt), rt) for rt in syncs)
    copies: list[CopyEvent] = []
    no_shapes = 0
    for op in ops:
        ts = float(_num(op.get("ts")) or 0.0)
        end = _end(op)
        a = _args(op)
        nbytes = _cpu_copy_bytes(a)
        if nbytes is None:
            no_shapes += 1
        dur = end - ts
        nb = _non_blocking(a)
        inner = nest.inside(op.get("tid"), ts, end)
        synced = bool(inner)
        blocking = True if synced else (None if nb is None else not nb)
        if not has_gpu:
            blocking = True  # a host copy keeps the host busy for its whole duration
        gbps = nbytes / (dur * 1e3) if nbytes is not None and dur > 0 else None
        link = ON_DEVICE if gbps is not None and gbps > threshold else PCIE
        direction = "H2H" if not has_gpu else ("D2D" if link == ON_DEVICE else "H2D/D2H")
        copies.append(
            CopyEvent(
                name=str(op.get("name")),
                direction=direction,
                link=link,
                start_us=ts,
                dur_us=dur,
                bytes=nbytes,
                direction_inferred=True,
                link_inferred=True,
                blocking=blocking,
                blocking_reason=(
                    "host copy" if not has_gpu else ("synchronize" if synced else None)
                ),
                host_us=dur,
                op=str(op.get("name")),
                thread=op.get("tid"),
                source="cpu",
            )
        )
    if no_shapes:
        info.warnings.append(
            f"{no_shapes} copy ops without tensor shapes: record the trace with "
            f"record_shapes=True to get their bytes"
        )
    if copies:
        info.warnings.append(
            "no GPU memcpy events in this trace: direction and link are inferred; "
            + link_rule_text(threshold)
        )
        if not has_gpu:
            info.warnings.append(
                "no GPU in this trace (CPU-only profile): its copies are host-memory copies "
                "(H2H), split into PCIe-like and HBM-like only by the bandwidth rule"
            )
    return copies


def _end(ev: dict[str, Any]) -> float:
    return float(_num(ev.get("ts")) or 0.0) + float(_num(ev.get("dur")) or 0.0)


def _outermost(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ops not nested inside another op of the list on the same thread (a copy_ that
    calls copy_ is one copy)."""
    by_thread: dict[Any, list[dict[str, Any]]] = {}
    for op in ops:
        by_thread.setdefault(op.get("tid"), []).append(op)
    out = []
    for thread_ops in by_thread.values():
        thread_ops.sort(key=lambda o: (float(_num(o.get("ts")) or 0.0), -_end(o)))
        open_end = -math.inf
        for op in thread_ops:
            if float(_num(op.get("ts")) or 0.0) < open_end:
                continue
            out.append(op)
            open_end = _end(op)
    out.sort(key=lambda o: float(_num(o.get("ts")) or 0.0))
    return out


# --------------------------------------------------------------------------------------
# Nsight Systems SQLite export


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
    mems = {k: _memory_kind(v.split()[-1] if v.split() else None) for k, v in mems_text.items()}
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
                nm = row[3] if name_col else ""
                if isinstance(nm, int):
                    nm = strings.get(nm, str(nm))
                runtime[int(row[2])] = (row[0] / 1e3, row[1] / 1e3, str(nm or ""))

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
            start, end = _num(r["start"]), _num(r["end"])
            if start is None or end is None or end < start:
                info.events_skipped += 1
                continue
            ck = _int(r["copyKind"])
            direction = kinds.get(ck) if ck is not None and ck in kinds else None
            if direction is None and ck is not None:
                direction = _COPY_KIND_DEFAULT.get(ck)
            inferred = direction is None
            direction = direction or "H2D/D2H"
            device = _int(r.get("deviceId"))
            src_dev, dst_dev = _int(r.get("srcDeviceId")), _int(r.get("dstDeviceId"))
            if (
                direction == "D2D"
                and src_dev is not None
                and dst_dev is not None
                and src_dev != dst_dev
            ):
                direction = "P2P"
            src_mem = mems.get(
                _int(r.get("srcKind")) or 0, _MEM_KIND_DEFAULT.get(_int(r.get("srcKind")) or 0)
            )
            dst_mem = mems.get(
                _int(r.get("dstKind")) or 0, _MEM_KIND_DEFAULT.get(_int(r.get("dstKind")) or 0)
            )
            s_us, d_us = start / 1e3, (end - start) / 1e3
            t_min, t_max = min(t_min, s_us), max(t_max, s_us + d_us)
            blocking: bool | None = None
            reason = None
            host_us = None
            rt = runtime.get(_int(r.get("correlationId")) or -1)
            if rt is not None:
                rt_start, rt_end, rt_name = rt
                host_us = rt_end - rt_start
                if rt_name.startswith("cudaMemcpy") and "Async" not in rt_name:
                    blocking, reason = True, f"{rt_name} (synchronous call)"
                elif rt_end >= s_us + d_us:
                    blocking, reason = True, f"{rt_name} returned after the copy finished"
                else:
                    blocking = False
            copies.append(
                CopyEvent(
                    name=f"memcpy {direction}",
                    direction=direction,
                    link=_LINK_OF.get(direction, PCIE),
                    start_us=s_us,
                    dur_us=d_us,
                    bytes=_int(r["bytes"]),
                    direction_inferred=inferred,
                    link_inferred=inferred,
                    blocking=blocking,
                    blocking_reason=reason,
                    host_us=host_us,
                    stream=_int(r.get("streamId")),
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
                start, end = _num(r["start"]), _num(r["end"])
                if start is None or end is None or end < start:
                    info.events_skipped += 1
                    continue
                nm = r.get("shortName", r.get("demangledName"))
                kernels.append(
                    Kernel(
                        name=strings.get(nm, str(nm)) if isinstance(nm, int) else str(nm or ""),
                        start_us=start / 1e3,
                        dur_us=(end - start) / 1e3,
                        device=_int(r.get("deviceId")),
                        stream=_int(r.get("streamId")),
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


# --------------------------------------------------------------------------------------
# Entry points


def parse_chrome_bytes(
    raw: bytes,
    source: str = "<bytes>",
    hbm_threshold_gbps: float = DEFAULT_HBM_THRESHOLD_GBPS,
) -> Trace:
    """A :class:`Trace` from the bytes of a Chrome-trace file (plain or gzip)."""
    data, warnings, gz_truncated = decompress(raw, source)
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        raise ParseError(
            "no trace data" + (" (the gzip stream ends before any data)" if gz_truncated else ""),
            source,
        )
    meta, events, more, truncated, used = parse_chrome_json(text, source)
    info = ReadInfo(
        path=source,
        format="torch-chrome",
        size_bytes=len(raw),
        bytes_read=len(text[:used].encode("utf-8", errors="replace")),
        events_read=len(events),
        truncated=truncated or gz_truncated,
        warnings=warnings + more,
    )
    info.events_skipped += sum(1 for w in more if "damaged" in w)
    return copies_from_chrome(events, meta, info, hbm_threshold_gbps)


def read_trace(path: str | Path, hbm_threshold_gbps: float = DEFAULT_HBM_THRESHOLD_GBPS) -> Trace:
    """Read one trace file: torch.profiler Chrome JSON (.json, .json.gz) or nsys SQLite."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory; give the trace files themselves")
    if p.suffix == ".nsys-rep" or p.suffix == ".qdrep":
        raise InputError(
            f"{p}: an Nsight Systems report; export it first with "
            f"`nsys export --type sqlite {p.name}` and give the .sqlite file"
        )
    with open(p, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"SQLite format 3"):
        return read_nsys_sqlite(p, hbm_threshold_gbps)
    return parse_chrome_bytes(p.read_bytes(), str(p), hbm_threshold_gbps)


# --------------------------------------------------------------------------------------
# Statistics


@dataclass
class Bin:
    lo: float
    hi: float | None
    count: int = 0
    bytes: int = 0
    time_us: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.lo:g}-{self.hi:g}" if self.hi is not None else f">{self.lo:g}"


def histogram(copies: Iterable[CopyEvent], edges: Sequence[float] = DEFAULT_BINS_GBPS) -> list[Bin]:
    """Copies by effective bandwidth: count, bytes and time per bin (GB/s; last bin open)."""
    bins = [Bin(lo, hi) for lo, hi in zip(edges, [*edges[1:], None], strict=True)]
    for c in copies:
        bw = c.gbps
        if bw is None:
            continue
        i = max(0, bisect.bisect_right(list(edges), bw) - 1)
        b = bins[i]
        b.count += 1
        b.bytes += c.bytes or 0
        b.time_us += c.dur_us
    return bins


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    total = 0.0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def _merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def overlap_length(a: Iterable[tuple[float, float]], b: Iterable[tuple[float, float]]) -> float:
    """Length of (union of a) ∩ (union of b)."""
    ma, mb = _merge(a), _merge(b)
    i = j = 0
    total = 0.0
    while i < len(ma) and j < len(mb):
        s = max(ma[i][0], mb[j][0])
        e = min(ma[i][1], mb[j][1])
        if e > s:
            total += e - s
        if ma[i][1] < mb[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass
class Group:
    """Totals of a set of copies."""

    count: int = 0
    bytes: int = 0
    time_us: float = 0.0
    blocking_count: int = 0
    blocking_us: float = 0.0

    @property
    def gbps(self) -> float | None:
        """Bytes-weighted effective bandwidth: all bytes over all copy time."""
        return self.bytes / (self.time_us * 1e3) if self.time_us > 0 else None

    def add(self, c: CopyEvent) -> None:
        self.count += 1
        self.bytes += c.bytes or 0
        self.time_us += c.dur_us
        if c.blocking:
            self.blocking_count += 1
            self.blocking_us += c.host_us if c.host_us is not None else c.dur_us

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "gbps": self.gbps}


@dataclass
class Summary:
    label: str
    copies: int
    bytes: int
    copy_time_us: float
    copy_busy_us: float  # union of copy intervals
    span_us: float
    gbps: float | None
    by_link: dict[str, Group]
    by_direction: dict[str, Group]
    histogram: list[Bin]
    blocking_count: int
    blocking_us: float
    async_count: int
    unknown_blocking: int
    line_rate_gbps: float | None
    line_rate_source: str | None
    pcie_gbps: float | None  # bytes-weighted over PCIe copies
    pcie_efficiency: float | None  # pcie_gbps / line rate
    kernels: int
    kernel_busy_us: float | None
    overlap_us: float | None  # copy time during which a kernel ran (same device)
    overlap_fraction: float | None
    inferred: bool
    streams: list[str]
    rule: str | None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["by_link"] = {k: v.to_dict() for k, v in self.by_link.items()}
        d["by_direction"] = {k: v.to_dict() for k, v in self.by_direction.items()}
        d["histogram"] = [{**dataclasses.asdict(b), "label": b.label} for b in self.histogram]
        return d


def summarize(
    trace: Trace,
    line_rate_gbps: float | None = None,
    line_rate_source: str | None = None,
    bins: Sequence[float] = DEFAULT_BINS_GBPS,
) -> Summary:
    copies = trace.copies
    total = Group()
    by_link: dict[str, Group] = {}
    by_dir: dict[str, Group] = {}
    for c in copies:
        total.add(c)
        by_link.setdefault(c.link, Group()).add(c)
        by_dir.setdefault(c.direction, Group()).add(c)
    pcie = by_link.get(PCIE)
    pcie_gbps = pcie.gbps if pcie else None
    eff = pcie_gbps / line_rate_gbps if pcie_gbps and line_rate_gbps else None
    overlap = overlap_frac = kernel_busy = None
    if trace.kernels:
        kernel_busy = union_length((k.start_us, k.start_us + k.dur_us) for k in trace.kernels)
        gpu_copies = [c for c in copies if c.source == "gpu"]
        if gpu_copies:
            overlap = 0.0
            devices = {c.device for c in gpu_copies}
            for d in devices:
                cs = [(c.start_us, c.end_us) for c in gpu_copies if c.device == d]
                ks = [
                    (k.start_us, k.start_us + k.dur_us)
                    for k in trace.kernels
                    if k.device == d or d is None or k.device is None
                ]
                overlap += overlap_length(cs, ks)
            busy = sum(
                union_length((c.start_us, c.end_us) for c in gpu_copies if c.device == d)
                for d in devices
            )
            overlap_frac = overlap / busy if busy > 0 else None
    streams = sorted({str(c.stream) for c in copies if c.stream is not None})
    inferred = any(c.link_inferred for c in copies)
    return Summary(
        label=trace.label,
        copies=total.count,
        bytes=total.bytes,
        copy_time_us=total.time_us,
        copy_busy_us=union_length((c.start_us, c.end_us) for c in copies),
        span_us=trace.span_us,
        gbps=total.gbps,
        by_link=by_link,
        by_direction=by_dir,
        histogram=histogram(copies, bins),
        blocking_count=total.blocking_count,
        blocking_us=total.blocking_us,
        async_count=sum(1 for c in copies if c.blocking is False),
        unknown_blocking=sum(1 for c in copies if c.blocking is None),
        line_rate_gbps=line_rate_gbps,
        line_rate_source=line_rate_source if line_rate_gbps else None,
        pcie_gbps=pcie_gbps,
        pcie_efficiency=eff,
        kernels=len(trace.kernels),
        kernel_busy_us=kernel_busy,
        overlap_us=overlap,
        overlap_fraction=overlap_frac,
        inferred=inferred,
        streams=streams,
        rule=link_rule_text(trace.hbm_threshold_gbps) if inferred else None,
    )


# Metrics compared side by side: (key, label, unit, better) where better is "higher",
# "lower" or None (no direction).
COMPARED: tuple[tuple[str, str, str, str | None], ...] = (
    ("copies", "copies", "", None),
    ("bytes", "bytes copied", "B", None),
    ("copy_time_us", "copy time (sum)", "us", "lower"),
    ("gbps", "weighted bandwidth, all copies", "GB/s", "higher"),
    ("pcie_gbps", "weighted bandwidth, PCIe copies", "GB/s", "higher"),
    ("pcie_efficiency", "PCIe bandwidth / line rate", "", "higher"),
    ("blocking_count", "blocking copies", "", "lower"),
    ("blocking_us", "host time blocked on copies", "us", "lower"),
    ("async_count", "asynchronous copies", "", None),
    ("overlap_fraction", "copy time overlapped with kernels", "", "higher"),
    ("span_us", "trace span", "us", "lower"),
)


@dataclass
class Change:
    key: str
    label: str
    unit: str
    before: float | None
    after: float | None
    delta: float | None
    ratio: float | None
    better: bool | None  # the change goes the good way (None: no direction or no change)


def compare(before: Summary, after: Summary) -> list[Change]:
    """Differences of the compared metrics from ``before`` to ``after``."""
    out = []
    for key, label, unit, better in COMPARED:
        b = getattr(before, key)
        a = getattr(after, key)
        b = float(b) if b is not None else None
        a = float(a) if a is not None else None
        delta = a - b if a is not None and b is not None else None
        ratio = a / b if a is not None and b else None
        good: bool | None = None
        if delta is not None and better and abs(delta) > 1e-12:
            good = (delta > 0) == (better == "higher")
        out.append(Change(key, label, unit, b, a, delta, ratio, good))
    return out


# --------------------------------------------------------------------------------------
# Result rows (kind copy, source trace)

_OP_OF = {
    "H2D": "h2d",
    "D2H": "d2h",
    "D2D": "d2d",
    "P2P": "p2p",
    "H2H": "h2h",
    "H2D/D2H": "h2d/d2h",
}


def _pct(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def trace_rows(
    trace: Trace,
    run_id: str,
    build: str | None = None,
    line_rate_gbps: float | None = None,
) -> list[Row]:
    """One row per (direction, size, memory, blocking, device, stream) group of copies."""
    groups: dict[tuple[Any, ...], list[CopyEvent]] = {}
    for c in trace.copies:
        key = (
            c.direction,
            c.bytes,
            c.src_memory,
            c.dst_memory,
            c.blocking,
            c.device,
            c.peer_device,
            str(c.stream) if c.stream is not None else None,
            c.link,
        )
        groups.setdefault(key, []).append(c)
    backend = "nsys" if trace.info.format == "nsys-sqlite" else "torch-profiler"
    rows = []
    for key, cs in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        direction, nbytes, src_mem, dst_mem, blocking, device, peer, stream, link = key
        times = [c.dur_us for c in cs]
        total_bytes = sum(c.bytes or 0 for c in cs)
        total_us = sum(times)
        gbps = total_bytes / (total_us * 1e3) if total_us > 0 and nbytes is not None else None
        gpu = f"GPU{device}" if device is not None else None
        src = dst = None
        if direction == "H2D":
            src, dst = "host", gpu
        elif direction == "D2H":
            src, dst = gpu, "host"
        elif direction == "D2D":
            src = dst = gpu
        elif direction == "P2P":
            src, dst = gpu, (f"GPU{peer}" if peer is not None else None)
        elif direction == "H2H":
            src = dst = "host"
        memory = src_mem if direction in ("H2D", "H2H") else dst_mem if direction == "D2H" else None
        if direction in ("D2D", "P2P"):
            memory = "device"
        expected = line_rate_gbps if link == PCIE else None
        extra: dict[str, Any] = {
            "trace_file": trace.info.path,
            "trace_format": trace.info.format,
            "link": link,
            "inferred": any(c.link_inferred for c in cs),
            "blocking": blocking,
            "stream": stream,
            "copy_time_us": total_us,
            "total_bytes": total_bytes,
            "blocking_us": sum(c.host_us or c.dur_us for c in cs if c.blocking),
        }
        if trace.info.truncated:
            extra["trace_truncated"] = True
        row = Row(
            run_id=run_id,
            kind="copy",
            backend=backend,
            op=_OP_OF.get(direction, direction.lower()),
            source="trace",
            world_size=1,
            size_bytes=nbytes,
            count=len(cs),
            iters=len(cs),
            time_us=statistics.fmean(times),
            time_us_p50=_pct(times, 0.5),
            time_us_p99=_pct(times, 0.99),
            algbw_gbps=gbps,
            busbw_gbps=gbps,
            bidirectional=False,
            memory=memory,
            src=src,
            dst=dst,
            expected_gbps=expected,
            efficiency=(gbps / expected) if gbps and expected else None,
            extra=extra,
        )
        if build:
            row.build = build
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------
# Line rate from the live topology


def probe_line_rate(device: int = 0) -> tuple[float | None, str | None]:
    """Host<->GPU line rate (GB/s per direction) of this machine's GPU, if it can be probed."""
    try:
        from gpulane.topology.bandwidth import expected_host_gbps  # type: ignore[import-not-found]
        from gpulane.topology.live import probe_topology  # type: ignore[import-not-found]
    except ImportError:
        return None, None
    try:
        topo = probe_topology()
        gbps = expected_host_gbps(topo, f"GPU{device}")
    except Exception:
        return None, None
    if gbps is None:
        return None, None
    try:
        value = float(gbps)
    except (TypeError, ValueError):
        return None, None
    if not math.isfinite(value) or value <= 0:
        return None, None
    return value, f"this machine's topology (GPU{device})"


def main_device(trace: Trace) -> int:
    """The device that moved the most PCIe bytes (0 when unknown)."""
    per: dict[int, int] = {}
    for c in trace.copies:
        if c.link == PCIE and c.device is not None:
            per[c.device] = per.get(c.device, 0) + (c.bytes or 0)
    return max(per, key=lambda d: per[d]) if per else 0
