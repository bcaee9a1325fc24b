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

The modules, in the order data flows through them:

- ``events``: the model every reader produces (CopyEvent, Kernel, ReadInfo, Trace);
  ``fields`` reads one event field tolerantly; ``aten`` reads an op's shapes.
- readers: ``decompress`` (gzip, cut or whole), ``chrome_json`` (the JSON, cut or
  whole), ``chrome`` (kineto events to copies and kernels), ``chrome_host`` (copies of a
  trace with no GPU memcpy events), ``nsys`` (SQLite exports); ``read`` picks one.
- ``summary`` (totals, histogram, overlap), ``diff`` (two summaries), ``rows`` (result
  rows), ``linerate`` (the line rate to compare with: given, or probed).
- output: ``report`` (terminal tables), ``plots`` (PNGs), ``jsondoc`` (--json), and
  ``analyse``, which is the whole `gpulane trace` command behind its argument parser.

Everything is a pure function of the file's bytes except :func:`read_trace`, which
opens the file, :func:`probe_line_rate`, which asks the live topology, and ``analyse``,
which prints and writes.
"""

from __future__ import annotations

from gpulane.analysis.trace.analyse import TraceRequest, analyse
from gpulane.analysis.trace.diff import Change, compare
from gpulane.analysis.trace.events import (
    DEFAULT_HBM_THRESHOLD_GBPS,
    ON_DEVICE,
    PCIE,
    CopyEvent,
    Kernel,
    ReadInfo,
    Trace,
)
from gpulane.analysis.trace.linerate import probe_line_rate
from gpulane.analysis.trace.read import read_trace
from gpulane.analysis.trace.rows import trace_rows
from gpulane.analysis.trace.summary import Summary, summarize

__all__ = [
    "DEFAULT_HBM_THRESHOLD_GBPS",
    "ON_DEVICE",
    "PCIE",
    "Change",
    "CopyEvent",
    "Kernel",
    "ReadInfo",
    "Summary",
    "Trace",
    "TraceRequest",
    "analyse",
    "compare",
    "probe_line_rate",
    "read_trace",
    "summarize",
    "trace_rows",
]
