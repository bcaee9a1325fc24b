"""The GPU side of `gpulane copy`: buffers, copies, device timing, checks.

One process drives every GPU. torch provides devices, streams, events, pinned host memory
(``torch.empty(pin_memory=True)``) and the sleep kernel; CuPy, when it can be imported,
provides the raw runtime calls torch does not expose:

- ``cudaMemcpyAsync`` / ``cudaMemcpyPeerAsync`` on torch's streams, so a timed copy is the
  same call a plain CUDA loop makes (torch's ``copy_`` adds checks and, for pageable memory,
  a stream synchronisation per call);
- ``cudaHostAlloc(cudaHostAllocPortable | cudaHostAllocWriteCombined)`` for write-combined
  pinned memory (torch has no flag for it): without CuPy it is reported as unavailable;
- ``cudaDeviceEnablePeerAccess`` / ``cudaDeviceDisablePeerAccess``: with peer access
  enabled a peer copy goes straight over NVLink or PCIe; with it disabled,
  ``cudaMemcpyPeerAsync`` still works but the driver stages the data through host memory,
  which is what p2pBandwidthLatencyTest reports as "P2P=Disabled". torch can only turn peer
  access on (it enables it itself on the first cross-device copy), so without CuPy the
  peer-access-off copies are reported as unavailable.

Timing: each sample holds the stream with a sleep kernel while its start event, the copies
and its end event are queued behind it, then lets the stream go; the events are read on the
device, so host launch overhead stays out. Pageable copies are staged by the driver on the
calling thread (the call returns only when the data is in its staging buffers), so they are
timed without the sleep, as bandwidthTest times them, and have no bidirectional variant.

Checks: every source holds int32 words equal to their own index; each destination is set
to 0xFF before a point and compared word for word with the pattern after its timed copies
(host destinations by copying them back to the device; CPU reads of write-combined memory
are uncached and would take seconds).

Nothing here imports torch or CuPy at module level, so the module loads without a GPU.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gpulane.errors import MissingComponent
from gpulane.transfers.points import Point
from gpulane.transfers.sizes import reps_for

CUDA_MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: direction from unified addressing
CUDA_HOST_ALLOC_PORTABLE = 1
CUDA_HOST_ALLOC_WRITE_COMBINED = 4
ERR_PEER_ALREADY_ENABLED = 704
ERR_PEER_NOT_ENABLED = 705
SLEEP_CYCLES_PER_US = 2000  # upper end of a GPU clock (2 GHz): sleeps run long, never short
MAX_SLEEP_US = 50_000
ENQUEUE_US = 8.0  # generous host cost of queueing one raw copy or event
ENQUEUE_US_TORCH = 40.0  # torch's copy_ checks and syncs more per call


def load_torch() -> Any:
    """torch with at least one visible GPU, or a MissingComponent saying what is missing."""
    import warnings

    try:
        import torch
    except ImportError as err:
        raise MissingComponent(
            "gpulane copy needs PyTorch with CUDA (pip install 'gpulane[torch]'); "
            "to read results measured elsewhere use `gpulane parse bandwidthtest FILE`"
        ) from err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok = bool(torch.cuda.is_available()) and int(torch.cuda.device_count()) > 0
    if not ok:
        why = "this torch has no CUDA" if torch.version.cuda is None else "torch sees no GPU"
        raise MissingComponent(
            f"gpulane copy needs an NVIDIA GPU and {why} (check nvidia-smi and "
            "CUDA_VISIBLE_DEVICES); to read results measured elsewhere use "
            "`gpulane parse bandwidthtest|p2p|nvbandwidth FILE`"
        )
    return torch


def load_cupy_runtime() -> Any | None:
    try:
        import cupy  # noqa: F401
        from cupy.cuda import runtime
    except Exception:
        return None
    return runtime


@dataclass
class Plan:
    """One stream's part of a timed point: a copy to queue, and how to check it."""

    stream: Any  # torch.cuda.Stream
    copy: Callable[[], None]
    check: Callable[[], int] | None = None
    reset: Callable[[], None] | None = None


@dataclass
class HostBuffers:
    kind: str  # pageable, pinned, pinned-wc
    src: Any  # torch uint8 CPU tensor holding the pattern
    dst: Any  # torch uint8 CPU tensor
    node: int | None
    frees: list[Callable[[], None]] = field(default_factory=list)

    def free(self) -> None:
        self.src = self.dst = None
        for f in self.frees:
            f()
        self.frees.clear()


@dataclass
class DeviceBuffers:
    index: int
    pattern: Any  # uint8 view of int32 words 0, 1, 2, ...
    dst: Any
    scratch: Any  # host destinations are copied back here to be checked
    streams: tuple[Any, Any]


class Copier:
    """Allocates buffers and times copies on one process's GPUs."""

    def __init__(
        self,
        gpus: list[int],
        max_size: int,
        *,
        samples: int = 10,
        warmup: int = 2,
        min_sample_bytes: int = 1 << 20,
        max_reps: int = 64,
        check: bool = True,
        use_cupy: bool = True,
    ) -> None:
        self.torch = load_torch()
        self.rt = load_cupy_runtime() if use_cupy else None
        self.gpus = gpus
        self.max_size = max_size
        self.samples = max(1, int(samples))
        self.warmup = max(0, int(warmup))
        self.min_sample_bytes = int(min_sample_bytes)
        self.max_reps = max(1, int(max_reps))
        self.check = check
        self.dev: dict[int, DeviceBuffers] = {}

    # ------------------------------------------------------------------ buffers

    def device(self, index: int) -> DeviceBuffers:
        if index in self.dev:
            return self.dev[index]
        torch = self.torch
        with torch.cuda.device(index):
            words = self.max_size // 4
            pattern = torch.arange(words, dtype=torch.int32, device=f"cuda:{index}").view(
                torch.uint8
            )
            dst = torch.empty(self.max_size, dtype=torch.uint8, device=f"cuda:{index}")
            scratch = torch.empty(self.max_size, dtype=torch.uint8, device=f"cuda:{index}")
            streams = (torch.cuda.Stream(device=index), torch.cuda.Stream(device=index))
        torch.cuda.synchronize(index)
        buf = DeviceBuffers(index, pattern, dst, scratch, streams)
        self.dev[index] = buf
        return buf

    def wc_available(self) -> bool:
        return self.rt is not None

    def peer_off_available(self) -> bool:
        return self.rt is not None

    def host(self, kind: str, node: int | None = None) -> HostBuffers:
        """Two host buffers of ``max_size`` (call inside numa.on_node for placement)."""
        import numpy as np

        torch = self.torch
        n = self.max_size
        frees: list[Callable[[], None]] = []
        if kind == "pageable":
            src = torch.empty(n, dtype=torch.uint8)
            dst = torch.empty(n, dtype=torch.uint8)
        elif kind == "pinned":
            src = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            dst = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        elif kind == "pinned-wc":
            if self.rt is None:
                raise MissingComponent(
                    "pinned-wc: write-combined host memory needs CuPy "
                    "(cudaHostAlloc with cudaHostAllocWriteCombined)"
                )
            rt = self.rt
            flags = CUDA_HOST_ALLOC_PORTABLE | CUDA_HOST_ALLOC_WRITE_COMBINED
            tensors = []
            for _ in range(2):
                ptr = int(rt.hostAlloc(n, flags))
                frees.append(functools.partial(rt.freeHost, ptr))
                raw = (ctypes.c_uint8 * n).from_address(ptr)
                array = np.ctypeslib.as_array(raw)
                tensors.append(torch.from_numpy(array))
            src, dst = tensors
        else:
            raise ValueError(f"unknown host memory kind {kind!r}")
        # First touch on this thread (placement), one 64 MiB chunk at a time, single-threaded.
        fill_pattern(src.numpy())
        dst.numpy().fill(0xFF)
        return HostBuffers(kind, src, dst, node, frees)

    # ------------------------------------------------------------------ copies

    def copy_fn(self, dst: Any, src: Any, n: int, stream: Any) -> Callable[[], None]:
        """Queue one copy of n bytes on ``stream`` (cudaMemcpyAsync, direction by UVA)."""
        if self.rt is not None:
            rt, d, s, h = self.rt, int(dst.data_ptr()), int(src.data_ptr()), int(stream.cuda_stream)

            def raw() -> None:
                rt.memcpyAsync(d, s, n, CUDA_MEMCPY_DEFAULT, h)

            return raw
        torch = self.torch
        dv, sv = dst[:n], src[:n]

        def via_torch() -> None:
            with torch.cuda.stream(stream):
                dv.copy_(sv, non_blocking=True)

        return via_torch

    def peer_fn(self, a: int, b: int, n: int, stream: Any) -> Callable[[], None]:
        """Queue a copy of n bytes from GPU a's pattern to GPU b's dst."""
        src, dst = self.device(a).pattern, self.device(b).dst
        if self.rt is not None:
            rt, d, s, h = self.rt, int(dst.data_ptr()), int(src.data_ptr()), int(stream.cuda_stream)

            def raw() -> None:
                rt.memcpyPeerAsync(d, b, s, a, n, h)

            return raw
        return self.copy_fn(dst, src, n, stream)

    def set_peer_access(self, on: bool) -> None:
        """Enable or disable peer access between every pair of chosen GPUs (both ways)."""
        rt = self.rt
        if rt is None:
            if not on:
                raise MissingComponent("peer access off needs CuPy (cudaDeviceDisablePeerAccess)")
            return  # torch enables peer access itself on the first peer copy
        from cupy.cuda.runtime import CUDARuntimeError

        current = rt.getDevice()
        try:
            for a in self.gpus:
                for b in self.gpus:
                    if a == b:
                        continue
                    rt.setDevice(a)
                    try:
                        if on:
                            if not rt.deviceCanAccessPeer(a, b):
                                continue
                            rt.deviceEnablePeerAccess(b)
                        else:
                            rt.deviceDisablePeerAccess(b)
                    except CUDARuntimeError as err:
                        expected = ERR_PEER_ALREADY_ENABLED if on else ERR_PEER_NOT_ENABLED
                        if getattr(err, "status", None) != expected:
                            raise
        finally:
            rt.setDevice(current)

    def can_access_peer(self, a: int, b: int) -> bool:
        if self.rt is not None:
            return bool(self.rt.deviceCanAccessPeer(a, b))
        return bool(self.torch.cuda.can_device_access_peer(a, b))

    # ------------------------------------------------------------------ checks

    def device_check(self, got: Any, index: int, n: int) -> Callable[[], int]:
        torch = self.torch
        ref = self.device(index).pattern

        def check() -> int:
            g, r = got[:n], ref[:n]
            if torch.equal(g, r):
                return 0
            return int((g.view(torch.int32) != r.view(torch.int32)).sum().item())

        return check

    def host_check(self, host_dst: Any, index: int, n: int) -> Callable[[], int]:
        """Copy a host destination back to GPU ``index`` and compare it there."""
        scratch = self.device(index).scratch
        compare = self.device_check(scratch, index, n)
        torch = self.torch

        def check() -> int:
            with torch.cuda.device(index):
                scratch[:n].copy_(host_dst[:n])
                torch.cuda.synchronize(index)
            return compare()

        return check

    def device_reset(self, t: Any, n: int) -> Callable[[], None]:
        return lambda: t[:n].fill_(0xFF)

    # ------------------------------------------------------------------ timing

    def time(
        self, plans: list[Plan], size: int, queue: bool = True
    ) -> tuple[list[list[float]], int, list[int | None]]:
        """Per plan, per sample: device time of one copy in µs; the reps; wrong words per plan.

        Plans run at the same time: each sample starts them together (the other streams
        wait on an event behind the first stream's sleep) and the next sample waits for
        all of them.
        """
        torch = self.torch
        reps = reps_for(size, self.min_sample_bytes, self.max_reps)
        if self.check:
            for p in plans:
                if p.reset is not None:
                    p.reset()
            # The resets ran on torch's current streams, which do not order with ours.
            for index in self.gpus:
                torch.cuda.synchronize(index)
        for p in plans:
            for _ in range(self.warmup):
                p.copy()
        for p in plans:
            p.stream.synchronize()
        ns = self.samples
        starts = [[torch.cuda.Event(enable_timing=True) for _ in range(ns)] for _ in plans]
        ends = [[torch.cuda.Event(enable_timing=True) for _ in range(ns)] for _ in plans]
        gos = [torch.cuda.Event() for _ in range(ns)]
        lead = plans[0].stream
        per_call = ENQUEUE_US if self.rt is not None else ENQUEUE_US_TORCH
        queued_us = per_call * (len(plans) * (reps + 2) + 2) + 20
        cycles = int(min(queued_us, MAX_SLEEP_US) * SLEEP_CYCLES_PER_US)
        for s in range(ns):
            if s > 0:
                for k in range(1, len(plans)):
                    lead.wait_event(ends[k][s - 1])
            if queue:
                with torch.cuda.stream(lead):
                    torch.cuda._sleep(cycles)
            if len(plans) > 1:
                gos[s].record(lead)
                for p in plans[1:]:
                    p.stream.wait_event(gos[s])
            for k, p in enumerate(plans):
                starts[k][s].record(p.stream)
                for _ in range(reps):
                    p.copy()
                ends[k][s].record(p.stream)
        for p in plans:
            p.stream.synchronize()
        times = [
            per_copy_us([starts[k][s].elapsed_time(ends[k][s]) for s in range(ns)], reps)
            for k in range(len(plans))
        ]
        wrong: list[int | None] = []
        for p in plans:
            wrong.append(p.check() if (self.check and p.check is not None) else None)
        return times, reps, wrong

    # ------------------------------------------------------------------ points

    def host_points(
        self, index: int, name: str, hb: HostBuffers, size: int, directions: list[str]
    ) -> Iterator[Point]:
        """h2d, d2h and both at once for one GPU, one host memory kind, one size."""
        dev = self.device(index)
        s0, s1 = dev.streams
        queue = hb.kind != "pageable"
        extra = {"numa_node": hb.node}

        def h2d(stream: Any) -> Plan:
            return Plan(
                stream,
                self.copy_fn(dev.dst, hb.src, size, stream),
                self.device_check(dev.dst, index, size),
                self.device_reset(dev.dst, size),
            )

        def d2h(stream: Any) -> Plan:
            return Plan(
                stream,
                self.copy_fn(hb.dst, dev.pattern, size, stream),
                self.host_check(hb.dst, index, size),
                self.device_reset(hb.dst, size),
            )

        for direction in directions:
            if direction == "h2d":
                (t,), reps, (w,) = self.time([h2d(s0)], size, queue)
                yield Point(
                    "h2d", "host", name, hb.kind, size, t, False, None, reps, w, dict(extra)
                )
            elif direction == "d2h":
                (t,), reps, (w,) = self.time([d2h(s0)], size, queue)
                yield Point(
                    "d2h", name, "host", hb.kind, size, t, False, None, reps, w, dict(extra)
                )
            elif direction == "bidir":
                if hb.kind == "pageable":
                    continue
                (th, td), reps, (wh, wd) = self.time([h2d(s0), d2h(s1)], size, queue)
                pair = f"{name}-{hb.kind}-{size}"
                yield Point(
                    "h2d", "host", name, hb.kind, size, th, True, None, reps, wh,
                    {**extra, "pair_id": pair},
                )  # fmt: skip
                yield Point(
                    "d2h", name, "host", hb.kind, size, td, True, None, reps, wd,
                    {**extra, "pair_id": pair},
                )  # fmt: skip

    def all_host_points(
        self, names: dict[int, str], buffers: dict[int, HostBuffers], size: int, op: str
    ) -> list[Point]:
        """Every GPU copying to (h2d) or from (d2h) its own pinned host buffers at once."""
        plans = []
        for index in self.gpus:
            dev, hb = self.device(index), buffers[index]
            stream = dev.streams[0]
            if op == "h2d":
                plans.append(
                    Plan(
                        stream,
                        self.copy_fn(dev.dst, hb.src, size, stream),
                        self.device_check(dev.dst, index, size),
                        self.device_reset(dev.dst, size),
                    )
                )
            else:
                plans.append(
                    Plan(
                        stream,
                        self.copy_fn(hb.dst, dev.pattern, size, stream),
                        self.host_check(hb.dst, index, size),
                        self.device_reset(hb.dst, size),
                    )
                )
        times, reps, wrong = self.time(plans, size, True)
        out = []
        for k, index in enumerate(self.gpus):
            src, dst = ("host", names[index]) if op == "h2d" else (names[index], "host")
            out.append(
                Point(
                    op, src, dst, buffers[index].kind, size, times[k], False, None, reps,
                    wrong[k], {"test": "all-gpus", "concurrent": len(self.gpus),
                               "numa_node": buffers[index].node},
                )
            )  # fmt: skip
        return out

    def peer_points(
        self, a: int, b: int, names: dict[int, str], size: int, peer: bool, bidir: bool,
        test: str | None = None,
    ) -> list[Point]:  # fmt: skip
        """GPU a -> GPU b (and b -> a at the same time when bidir), queued on the source."""
        da, db = self.device(a), self.device(b)
        plans = [
            Plan(
                da.streams[0],
                self.peer_fn(a, b, size, da.streams[0]),
                self.device_check(db.dst, b, size),
                self.device_reset(db.dst, size),
            )
        ]
        if bidir:
            plans.append(
                Plan(
                    db.streams[0],
                    self.peer_fn(b, a, size, db.streams[0]),
                    self.device_check(da.dst, a, size),
                    self.device_reset(da.dst, size),
                )
            )
        times, reps, wrong = self.time(plans, size, True)
        extra: dict[str, Any] = {"p2p_method": "writes"}
        if test:
            extra["test"] = test
        if bidir:
            extra["pair_id"] = f"{names[a]}-{names[b]}-{peer}-{size}"
        out = [
            Point(
                "p2p",
                names[a],
                names[b],
                "device",
                size,
                times[0],
                bidir,
                peer,
                reps,
                wrong[0],
                dict(extra),
            )
        ]
        if bidir:
            out.append(
                Point(
                    "p2p",
                    names[b],
                    names[a],
                    "device",
                    size,
                    times[1],
                    bidir,
                    peer,
                    reps,
                    wrong[1],
                    dict(extra),
                )
            )
        return out

    @contextmanager
    def in_flight(self, index: int, hb: HostBuffers) -> Iterator[None]:
        """A large host->device copy running on GPU ``index`` for the block's duration."""
        dev = self.device(index)
        stream = dev.streams[0]
        fn = self.copy_fn(dev.dst, hb.src, self.max_size, stream)
        for _ in range(4):
            fn()
        try:
            yield
        finally:
            stream.synchronize()

    def close(self) -> None:
        for dev in self.dev.values():
            for s in dev.streams:
                s.synchronize()
        self.dev.clear()


def per_copy_us(sample_ms: list[float], reps: int) -> list[float]:
    """The time of one copy, in µs, of each timed sample: a sample (CUDA events around
    ``reps`` back-to-back copies, in ms as ``Event.elapsed_time`` gives it) divided by the
    copies it timed."""
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    return [ms * 1000.0 / reps for ms in sample_ms]


def fill_pattern(array: Any, chunk_words: int = 1 << 24) -> None:
    """Fill a uint8 numpy array with int32 words equal to their index (native byte order)."""
    import numpy as np

    words = array.view(np.int32)
    for lo in range(0, words.size, chunk_words):
        hi = min(words.size, lo + chunk_words)
        words[lo:hi] = np.arange(lo, hi, dtype=np.int32)
