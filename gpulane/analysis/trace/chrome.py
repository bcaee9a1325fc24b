"""torch.profiler (kineto) Chrome traces: their events as copies and kernels.

Where the trace has GPU memcpy activity (``cat: gpu_memcpy``), direction, memory kinds
and link come from the event's name ("Memcpy HtoD (Pageable -> Device)"), bytes from its
args, and whether the host waited from the runtime call and the aten::copy_ that issued
it (joined by correlation and External id). A trace with no GPU memcpy events at all is
read from its host-side copy ops instead (:mod:`.chrome_host`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from gpulane.analysis.trace.aten import CPU_COPY_OPS, SYNC_CALLS, copy_bytes, non_blocking
from gpulane.analysis.trace.chrome_host import host_copies
from gpulane.analysis.trace.chrome_json import parse_chrome_json
from gpulane.analysis.trace.decompress import decompress
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
from gpulane.analysis.trace.fields import event_args, integer, memory_kind, number
from gpulane.errors import ParseError

# "Memcpy HtoD (Pageable -> Device)": the direction, then source and destination memory.
_MEMCPY_NAME = re.compile(
    r"Memcpy\s+(HtoD|DtoH|DtoD|PtoP|HtoH)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.I
)
_KIND_FROM_NAME = {"htod": "H2D", "dtoh": "D2H", "dtod": "D2D", "ptop": "P2P", "htoh": "H2H"}


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
        ts, dur = number(ev.get("ts")), number(ev.get("dur"))
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
            a = event_args(ev)
            kernels.append(
                Kernel(
                    name=str(ev.get("name", "")),
                    start_us=ts,
                    dur_us=dur,
                    device=integer(a.get("device")),
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
        if op.get("name") in CPU_COPY_OPS:
            ext = integer(event_args(op).get("External id"))
            if ext is not None:
                copy_ops_by_ext[ext] = op
    runtime_by_corr: dict[int, dict[str, Any]] = {}
    syncs_by_ext: dict[int, list[dict[str, Any]]] = {}
    for rt in runtime:
        a = event_args(rt)
        corr = integer(a.get("correlation"))
        if corr is not None:
            runtime_by_corr[corr] = rt
        ext = integer(a.get("External id"))
        if ext is not None and str(rt.get("name", "")).startswith(SYNC_CALLS):
            syncs_by_ext.setdefault(ext, []).append(rt)

    copies: list[CopyEvent] = []
    for ev in gpu_copies:
        copies.append(_gpu_copy(ev, copy_ops_by_ext, runtime_by_corr, syncs_by_ext))
    unknown_bytes = sum(1 for c in copies if c.bytes is None)
    if unknown_bytes:
        info.warnings.append(f"{unknown_bytes} GPU copies carry no byte count")

    seen = {integer(event_args(ev).get("correlation")) for ev in gpu_copies}
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
        copies = host_copies(cpu_ops, runtime, has_gpu, hbm_threshold_gbps, info)
        if copies and has_gpu and info.truncated:
            # kineto writes the host ops first and the GPU activity after them, so a cut
            # often loses every memcpy event while the copy_ ops that issued them remain.
            info.warnings.append(
                "the cut may have lost this trace's GPU memcpy events (written after the "
                "host ops): its copies are read from the host-side copy_ ops instead"
            )

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
    a = event_args(ev)
    name = str(ev.get("name", ""))
    ts = float(number(ev.get("ts")) or 0.0)
    dur = float(number(ev.get("dur")) or 0.0)
    m = _MEMCPY_NAME.search(name)
    direction, inferred = "H2D/D2H", True
    src_mem = dst_mem = None
    if m:
        direction, inferred = _KIND_FROM_NAME[m.group(1).lower()], False
        src_mem, dst_mem = memory_kind(m.group(2)), memory_kind(m.group(3))
    device = integer(a.get("device"))
    peer = None
    for key in ("dst device", "dst_device", "dstDevice"):
        if key in a:
            peer = integer(a.get(key))
    if direction == "D2D" and peer is not None and device is not None and peer != device:
        direction = "P2P"
    nbytes = integer(a.get("bytes"))
    ext = integer(a.get("External id"))
    op = copy_ops_by_ext.get(ext) if ext is not None else None
    if nbytes is None and op is not None:
        nbytes = copy_bytes(event_args(op))
    if nbytes is None:
        bw = number(a.get("memory bandwidth (GB/s)"))
        if bw is not None and dur > 0:
            nbytes = round(bw * dur * 1e3)
    rt = runtime_by_corr.get(integer(a.get("correlation")) or -1)
    blocking: bool | None = None
    reason = None
    host_us = None
    if rt is not None:
        host_us = number(rt.get("dur"))
        rt_end = float(number(rt.get("ts")) or 0.0) + float(host_us or 0.0)
        blocking, reason = host_waited(str(rt.get("name", "")), rt_end, ts + dur)
    if op is not None:
        oa = event_args(op)
        nb = non_blocking(oa)
        syncs = syncs_by_ext.get(ext, []) if ext is not None else []
        if nb is False or syncs:
            blocking = True
            reason = "non_blocking=False" if nb is False else syncs[0].get("name")
        elif nb is True and blocking is None:
            blocking = False
        if blocking:
            host_us = number(op.get("dur"))
    stream = a.get("stream", ev.get("tid"))
    return CopyEvent(
        name=name,
        direction=direction,
        link=LINK_OF.get(direction, PCIE),
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
