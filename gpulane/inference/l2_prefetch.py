"""Weights read ahead into the GPU's L2 cache while a decode step's small kernels run
(``l2_prefetch=MiB`` of `gpulane tokens`).

Why: a decode step alternates matrix products that stream their weights at the copy
rate with kernels that wait on latency, not on DRAM: attention over a short cache,
RMSNorm, SiLU x up, cuBLAS's split-K reductions and the TP all-reduce. The 8B's step at
TP=1 spends some 10 us a layer in its attention kernel alone while DRAM idles (round 7,
``benchmarks/inference/README.md``). As soon as a product has finished, a side stream
issues bulk L2 prefetches (``cp.async.bulk.prefetch.L2.global``, the TMA's, sm_90 and
newer) of the first bytes of the next product's weight; the product then finds them in
L2, and DRAM reads the rest. The bytes read from DRAM are the same, so the roofline
holds; only the idle time between products shrinks. PRESERVE (Yüzügüler et al., arXiv
2501.08192) does this during collectives; vLLM-Ascend's ``weight_prefetch_config`` does
it during RMSNorm and SwiGLU.

Where a decode layer prefetches (:meth:`gpulane.inference.model.Layer.forward_fused`):
``w_o`` once QKV is out (during attention), ``w_gate_up`` once o_proj is out (its
split-K reduction, the all-reduce and RMSNorm), ``w_down`` once gate/up is out (SiLU x
up), and the next layer's ``w_qkv`` (or the LM head after the last layer) once down is out
(its reduction, the all-reduce and the next RMSNorm). At most ``budget`` bytes of each,
from its start: more than the window can fill, or than L2 keeps, is read twice.

The prefetch changes no value, so the step's numbers are the same with it or without;
without a GPU the prefetcher only records what it would have prefetched (``log``),
which is how the tests check the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

MiB = 1 << 20


@dataclass(frozen=True)
class Launch:
    """How a prefetch is issued: ``chunk`` bytes per instruction (a bulk prefetch of that
    size, or with ``bulk=False`` one ``prefetch.global.L2`` per 128-byte line), ``per``
    instructions per program, ``warps`` per program. Many small programs spread the
    prefetch over many SMs, each issuing a few instructions."""

    chunk: int = 4096
    per: int = 32
    warps: int = 1
    bulk: bool = True

    @property
    def name(self) -> str:
        kind = "bulk" if self.bulk else "line"
        return f"{kind}{self.chunk // 1024 or self.chunk}{'k' if self.chunk >= 1024 else 'b'}x{self.per}w{self.warps}"


# round 8's launches (benchmarks/inference/l2_prefetch.py, 4x H100): the first one kept
LAUNCHES = {
    x.name: x
    for x in (
        Launch(),
        Launch(16384, 128, 4),
        Launch(8192, 32, 1),
        Launch(2048, 32, 1),
        Launch(128, 256, 2, bulk=False),
    )
}
DEFAULT = Launch()
CHUNK = DEFAULT.chunk
# where a layer prefetches, named after the product that follows the window: qkv (after
# down's all-reduce, or the embedding; the LM head after the last layer), o (attention),
# gate_up (o_proj's reduction, all-reduce, RMSNorm), down (SiLU x up)
WINDOWS = ("qkv", "o", "gate_up", "down")
MIN_CAPABILITY = (9, 0)  # the bulk prefetch is Hopper's TMA


def prefetch_bytes(nbytes: int, budget: int) -> int:
    """Bytes of a weight of ``nbytes`` to prefetch under ``budget``: from its start, a
    multiple of 16 (the bulk prefetch's granule), never more than the weight."""
    return max(0, min(nbytes, budget)) // 16 * 16


def chunks(nbytes: int, chunk: int = CHUNK) -> tuple[int, int]:
    """(instructions, bytes of the last) for ``nbytes`` (a multiple of 16) in ``chunk``s."""
    if nbytes <= 0:
        return 0, 0
    n = -(-nbytes // chunk)
    return n, nbytes - (n - 1) * chunk


def supported(device: torch.device) -> str | None:
    """Why ``l2_prefetch`` cannot run on ``device`` (None: it can)."""
    if device.type != "cuda":
        return "l2_prefetch needs a GPU"
    cap = torch.cuda.get_device_capability(device)
    if cap < MIN_CAPABILITY:
        return f"l2_prefetch needs sm_90 or newer (Hopper's bulk prefetch); this GPU is sm_{cap[0]}{cap[1]}"
    return None


def _kernel() -> Any:
    """The triton kernel, made on first use (no triton import for CPU runs)."""
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def _prefetch_l2(
            base, n_chunks, last_bytes, CHUNK: tl.constexpr, PER: tl.constexpr, BULK: tl.constexpr
        ):
            i = tl.program_id(0) * PER + tl.arange(0, PER)
            size = tl.where(i == n_chunks - 1, last_bytes, CHUNK)
            addr = base + i.to(tl.int64) * CHUNK
            live = (i < n_chunks).to(tl.int32)
            # one instruction per thread; the asm has effects (is_pure=False): it is kept
            if BULK:
                tl.inline_asm_elementwise(
                    "{ .reg .pred p; .reg .u64 g; setp.ne.s32 p, $3, 0; cvta.to.global.u64 g, $1; "
                    "@p cp.async.bulk.prefetch.L2.global [g], $2; mov.u32 $0, 0; }",
                    "=r,l,r,r", [addr, size, live], dtype=tl.int32, is_pure=False, pack=1,
                )  # fmt: skip
            else:  # one 128-byte line per instruction (size unused)
                tl.inline_asm_elementwise(
                    "{ .reg .pred p; .reg .u64 g; setp.ne.s32 p, $3, 0; cvta.to.global.u64 g, $1; "
                    "@p prefetch.global.L2 [g]; mov.u32 $0, $2; }",
                    "=r,l,r,r", [addr, size, live], dtype=tl.int32, is_pure=False, pack=1,
                )  # fmt: skip

        _KERNEL = _prefetch_l2
    return _KERNEL


_KERNEL: Any = None


def launch(w: torch.Tensor, nbytes: int, how: Launch = DEFAULT) -> None:
    """Prefetch the first ``nbytes`` of contiguous ``w`` into L2 on the current stream."""
    n, last = chunks(nbytes, how.chunk)
    if n:
        grid = (-(-n // how.per),)
        _kernel()[grid](
            w.data_ptr(), n, last, CHUNK=how.chunk, PER=how.per, BULK=how.bulk,
            num_warps=how.warps,
        )  # fmt: skip


@dataclass
class L2Prefetch:
    """The decode step's prefetches, on a stream of their own.

    ``ahead(name, w)`` waits for what the current stream has issued so far (the product
    before) and then prefetches the head of ``w``; ``join()`` makes the current stream
    wait for the side stream, as a CUDA graph's capture wants before it ends. On a CPU
    (or with ``dry=True``) nothing is launched; every call is recorded in ``log`` as
    (name, bytes)."""

    budget: int  # bytes of each weight at most
    how: Launch = DEFAULT
    # the windows prefetched in (WINDOWS: named after the product that follows); None: all
    windows: frozenset[str] | None = None
    dry: bool = False
    log: list[tuple[str, int]] = field(default_factory=list)
    stream: Any = None

    def uses(self, window: str) -> bool:
        return self.windows is None or window in self.windows

    def ahead(self, window: str, name: str, w: torch.Tensor | None) -> None:
        assert window in WINDOWS, window
        if w is None or not self.uses(window):
            return
        nbytes = prefetch_bytes(w.numel() * w.element_size(), self.budget)
        if not w.is_contiguous():  # a strided view's head is not one range
            nbytes = 0
        if self.dry or not w.is_cuda:  # recorded, not launched (a GPU run records nothing)
            self.log.append((name, nbytes))
            return
        if nbytes == 0:
            return
        if self.stream is None:
            self.stream = torch.cuda.Stream(w.device)
        self.stream.wait_stream(torch.cuda.current_stream(w.device))
        with torch.cuda.stream(self.stream):
            launch(w, nbytes, self.how)

    def join(self) -> None:
        if self.stream is not None:
            torch.cuda.current_stream(self.stream.device).wait_stream(self.stream)
