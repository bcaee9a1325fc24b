"""One split's prediction: memory, one decode step and one prefill (= TTFT), and the
rule of thumb beside them. The model (printed by the command, :data:`MODEL_TEXT`):

- a stage's time for a micro-batch = compute + its TP collectives (no overlap of the
  all-reduces with compute: each sits between two matmuls on the critical path);
- decode step = max(m x slowest stage, sum of stage times + sends), with m micro-batches
  in flight (m = pp, capped at the batch, as ``gpulane tokens`` runs them);
- prefill (= TTFT) = (k - 1) x slowest stage + sum of stage times + sends, for k chunks of
  whole sequences (at most ``chunk_tokens`` tokens, at least m chunks when pp > 1); where
  the host's launches are slower than a stage's GPU work, :func:`pipeline_ms` (each
  stage's host issuing its chunks side by side with the others');
- sends between stages overlap other micro-batches' compute in the steady state, and
  count on the fill path and on a micro-batch's round trip.

The communication of a step comes from :mod:`gpulane.inference.sharding` (2 all-reduces
per layer of hidden x tokens x bytes, one more for the vocabulary-parallel embedding, an
all-gather of the logits, 2 sends of hidden x tokens x bytes between pipeline stages).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpulane.errors import InputError
from gpulane.inference.batching import prefill_chunks
from gpulane.inference.memory import OVERHEAD_BYTES, GiB, MemoryEstimate, cache_len, estimate
from gpulane.inference.shapes import ModelShape
from gpulane.inference.sharding import CommCall, check_parallel, step_comm
from gpulane.planning.comm import Comms, busbw_factor
from gpulane.planning.compute import Compute
from gpulane.planning.placement import Placement
from gpulane.planning.uncertainty import Basis

RULE_OF_THUMB = 0.70  # the seed document: needed bandwidth above 70% of the link: trouble
TOKEN_BYTES = 8  # sampled token ids (int64) sent back from the last stage to the first

MODEL_TEXT = """\
model (per GPU; TP all-reduces do not overlap compute, pipeline sends do):
  stage time  = compute of its layers + its TP collectives
                (2 all-reduces per layer of hidden x tokens x bytes, +1 on the first stage
                 for the embedding, an all-gather of the logits on the last); in a
                decode step each TP collective also pays what the calibration's steps,
                timed with and without their collectives, took beyond its curve
  decode step = max(m x slowest stage, sum of stages + sends)       m micro-batches in flight
                tokens = batch / m per micro-batch; sends: 2 x hidden x tokens x bytes per
                stage boundary, and the sampled tokens back to stage 0
  prefill     = (k - 1) x slowest stage + sum of stages + sends    k chunks of whole sequences
                tokens = sequences x input_len per chunk; TTFT = prefill of the whole batch;
                a pipeline's chunks run eagerly: each stage's host issues its k chunks
                from the start, side by side with the others (a receive waits on the
                GPU, not the host), at the host's cost of its kernels, collectives and
                sends (the typical pass's cost a launch: the median of the eager
                prefills the calibration timed beside its graph replays); a stage
                finishes a chunk no sooner than its host has issued it
  decode tok/s = batch / step; prefill tok/s = batch x input_len / TTFT
  collective times: measured curves of the build, interpolated log-log over size (linear
  in size above the largest measured size), where the ranks' path is the measured one;
  otherwise projected: latency + size x busbw factor / (efficiency x path GB/s)"""


@dataclass
class Phase:
    """One decode step or one prefill of a split, and what it is made of (ms)."""

    time_ms: float
    tokens_per_s: float
    compute_ms: float  # slowest stage's compute for one micro-batch / chunk
    allreduce_ms: float  # the same stage's TP all-reduces (and logits all-gather)
    send_ms: float  # sends of one micro-batch / chunk over all stage boundaries
    stage_ms: float  # slowest stage, compute + collectives
    units: int  # micro-batches (decode) or chunks (prefill)
    tokens: int  # tokens per micro-batch / chunk
    allreduce_share: float  # of the step or prefill spent in TP collectives
    bubble_share: float  # of the step or prefill the slowest stage is idle
    calls: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


@dataclass
class Rule:
    """The seed document's rule of thumb, beside the prediction (not used for it)."""

    needed_gbps: float
    link_gbps: float | None
    fraction: float | None
    trouble: bool | None
    link_source: str = ""

    def text(self) -> str:
        if self.link_gbps is None or self.fraction is None:
            return f"needs {self.needed_gbps:.1f} GB/s (link unknown)"
        verdict = "expect trouble" if self.trouble else "ok"
        return (
            f"needs {self.needed_gbps:.1f} GB/s = {100 * self.fraction:.0f}% of "
            f"{self.link_gbps:.0f} GB/s: {verdict}"
        )


@dataclass
class Prediction:
    tp: int
    pp: int
    batch: int
    input_len: int
    output_len: int
    micro_batches: int
    fits: bool
    memory: MemoryEstimate
    memory_budget: int
    placement: Placement
    decode: Phase | None = None
    prefill: Phase | None = None
    rule_decode: Rule | None = None
    rule_prefill: Rule | None = None
    refused: str | None = None
    # (what NCCL used, where that is known from) for the TP collectives and the pipeline
    # sends, where the build's rows say; None: only the topology's path label is known
    tp_transport: tuple[str, str] | None = None
    pp_transport: tuple[str, str] | None = None
    basis: Basis | None = None  # what the figures rest on, and their expected error

    @property
    def name(self) -> str:
        return split_name(self.tp, self.pp)

    @property
    def ttft_ms(self) -> float | None:
        return self.prefill.time_ms if self.prefill else None

    @property
    def request_ms(self) -> float | None:
        """One request end to end: TTFT + (output_len - 1) decode steps."""
        if self.prefill is None or self.decode is None:
            return None
        return self.prefill.time_ms + max(0, self.output_len - 1) * self.decode.time_ms

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["name"] = self.name
        out["request_ms"] = self.request_ms
        out["memory"] = {**asdict(self.memory), "total": self.memory.total}
        out["placement"]["describe"] = self.placement.describe()
        out["basis"] = self.basis.to_dict() if self.basis else None
        return out


def split_name(tp: int, pp: int) -> str:
    if pp == 1:
        return f"TP={tp}"
    if tp == 1:
        return f"PP={pp}"
    return f"PP={pp}xTP={tp}"


def splits(shape: ModelShape, gpus: int) -> list[tuple[int, int, str | None]]:
    """Every (tp, pp) with tp x pp = gpus, and why the shapes refuse it (None: they don't)."""
    out: list[tuple[int, int, str | None]] = []
    for tp in range(gpus, 0, -1):
        if gpus % tp:
            continue
        pp = gpus // tp
        try:
            check_parallel(shape, tp, pp)
            out.append((tp, pp, None))
        except InputError as err:
            out.append((tp, pp, str(err)))
    return out


@dataclass(frozen=True)
class Workload:
    batch: int
    input_len: int
    output_len: int
    dtype_bytes: int = 2
    micro_batches: int | None = None  # None: pp, capped at the batch
    chunk_tokens: int = 16384
    memory_fraction: float = 0.92

    def micro(self, pp: int) -> int:
        n = pp if self.micro_batches is None else self.micro_batches
        return max(1, min(n, self.batch))


def _stage_comm(
    comms: Comms, calls: list[CommCall], tp: int, placement: Placement, extra_ms: float = 0.0
) -> tuple[float, float, list[dict[str, Any]], list[str]]:
    """(TP collective ms, send ms, calls with their times, sources) of one stage's calls;
    ``extra_ms`` added to each TP collective (its cost inside a step beyond its curve)."""
    coll = sends = 0.0
    out, sources = [], []
    for c in calls:
        if c.op == "send":
            t = comms.time("send", 2, c.size_bytes, placement.pp_label, placement.pp_gbps)
            sends += c.count * t.time_us / 1e3
        else:
            t = comms.time(c.op, tp, c.size_bytes, placement.tp_label, placement.tp_gbps)
            coll += c.count * (t.time_us / 1e3 + extra_ms)
        out.append({**c.to_dict(), "time_us": t.time_us, "source": t.source,
                    "extrapolated": t.extrapolated})  # fmt: skip
        if t.source not in sources:
            sources.append(t.source)
    return coll, sends, out, sources


def _phase(
    shape: ModelShape,
    tp: int,
    pp: int,
    units: int,
    tokens: int,
    rows: int,
    compute_ms: list[float],
    comms: Comms,
    placement: Placement,
    dbytes: int,
    decode: bool,
    total_tokens: int,
    host_ms: list[float] | None = None,
    collective_extra_ms: float = 0.0,
) -> Phase:
    stage_ms, coll_ms, boundary_ms, send_ms = [], [], [], 0.0
    all_calls: list[dict[str, Any]] = []
    sources: list[str] = []
    for s in range(pp):
        calls = step_comm(shape, tp, pp, tokens, rows, dbytes, s)
        coll, sends, detail, src = _stage_comm(comms, calls, tp, placement, collective_extra_ms)
        if decode and pp > 1 and s == pp - 1:  # sampled tokens back to stage 0
            t = comms.time("send", 2, rows * TOKEN_BYTES, placement.pp_label, placement.pp_gbps)
            sends += t.time_us / 1e3
        stage_ms.append(compute_ms[s] + coll)
        coll_ms.append(coll)
        boundary_ms.append(sends)
        send_ms += sends
        all_calls += [{**d, "stage": s} for d in detail]
        sources += [x for x in src if x not in sources]
    host = host_ms or [0.0] * pp
    # the slowest stage per unit: its GPU time, or the host's time to issue it
    slow = max(range(pp), key=lambda s: max(stage_ms[s], host[s]))
    chain = sum(stage_ms) + send_ms
    if decode:
        # m micro-batches in flight, each returning to stage 0 before its next step
        total = max(units * stage_ms[slow], chain)
    else:
        total = pipeline_ms(stage_ms, boundary_ms, host, units)
    slowest = max(stage_ms[slow], host[slow])
    busy = units * slowest
    return Phase(
        time_ms=total,
        tokens_per_s=total_tokens / (total / 1e3),
        compute_ms=compute_ms[slow],
        allreduce_ms=coll_ms[slow],
        send_ms=send_ms,
        stage_ms=slowest,
        units=units,
        tokens=tokens,
        allreduce_share=units * coll_ms[slow] / total if total else 0.0,
        bubble_share=max(0.0, 1.0 - busy / total) if total else 0.0,
        calls=all_calls,
        sources=sources,
    )


def pipeline_ms(
    gpu_ms: list[float], send_ms: list[float], host_ms: list[float], chunks: int
) -> float:
    """A prefill's chunks streamed through the stages: when the last stage is done with
    the last chunk (and its sends, the sampled tokens back to stage 0 included).

    Stage s finishes chunk j when its GPU has the chunk's input (stage s-1 done with it,
    plus the send), has finished chunk j-1, and has run the chunk's ``gpu_ms[s]``; and
    not before its host has issued the chunk: each stage's host issues its chunks one
    after the other (``host_ms[s]`` each, 0 when the host keeps ahead), from the start,
    whatever the other stages do, since a receive is queued on the GPU, not waited for
    by the host. So host-bound stages issue side by side, and a pipeline of them takes
    chunks x the slowest host plus one chunk's GPU time per further stage, not (chunks
    + stages - 1) x the host's time. With no host floor this is the usual
    (chunks - 1) x slowest stage + sum of stages + sends."""
    pp = len(gpu_ms)
    done = [0.0] * pp  # per stage: when it finished its previous chunk
    for j in range(chunks):
        arrived = 0.0
        for s in range(pp):
            start = max(arrived, done[s])
            done[s] = max(start + gpu_ms[s], (j + 1) * host_ms[s])
            arrived = done[s] + send_ms[s]
    return arrived


def _rule(phase: Phase, tp: int, link: float | None, link_source: str) -> Rule | None:
    """Bandwidth the TP all-reduces would need to take no longer than the compute, per
    direction (bytes on the wire: size x 2(n-1)/n), against the path's bandwidth."""
    if tp == 1 or phase.compute_ms <= 0:
        return None
    wire = sum(
        c["count"] * c["size_bytes"] * busbw_factor(c["op"], tp)
        for c in phase.calls
        if c["op"] != "send" and c["stage"] == 0
    )
    needed = wire / (phase.compute_ms / 1e3) / 1e9
    frac = needed / link if link else None
    return Rule(needed, link, frac, None if frac is None else frac > RULE_OF_THUMB, link_source)


def largest_batch(
    shape: ModelShape, tp: int, pp: int, wl: Workload, memory_gib: float, limit: int = 8192
) -> int:
    """The most sequences of ``wl``'s lengths a split holds in ``memory_fraction`` of each
    GPU's memory (0: not one): what a throughput benchmark that fills the KV cache runs
    (trtllm-bench, vLLM at a large --max-num-seqs), by the same memory model as predict."""
    budget = int(memory_gib * GiB * wl.memory_fraction)

    def fits(batch: int) -> bool:
        mem = estimate(
            shape, tp, pp, batch, wl.input_len, wl.output_len, wl.dtype_bytes,
            wl.chunk_tokens, OVERHEAD_BYTES,
        )  # fmt: skip
        return mem.total <= budget

    lo, hi = 0, limit  # fits(lo) holds (or lo == 0); the answer is in [lo, hi]
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def predict(
    shape: ModelShape,
    tp: int,
    pp: int,
    wl: Workload,
    comms: Comms,
    compute: Compute,
    placement: Placement,
    memory_gib: float,
) -> Prediction:
    """Memory, prefill and decode of one split, at one batch."""
    dbytes = wl.dtype_bytes
    mem = estimate(
        shape, tp, pp, wl.batch, wl.input_len, wl.output_len, dbytes, wl.chunk_tokens,
        OVERHEAD_BYTES,
    )  # fmt: skip
    budget = int(memory_gib * GiB * wl.memory_fraction)
    m = wl.micro(pp)
    pred = Prediction(
        tp=tp, pp=pp, batch=wl.batch, input_len=wl.input_len, output_len=wl.output_len,
        micro_batches=m, fits=mem.total <= budget, memory=mem, memory_budget=budget,
        placement=placement,
    )  # fmt: skip
    if tp > 1:
        pred.tp_transport = comms.transport("all_reduce", tp, placement.tp_label)
    if pp > 1:
        pred.pp_transport = comms.transport("sendrecv", 2, placement.pp_label) or comms.transport(
            "all_gather", 2, placement.pp_label
        )
    if not pred.fits:
        pred.refused = (
            f"needs {mem.describe()} per GPU, more than {budget / GiB:.1f} GiB "
            f"({100 * wl.memory_fraction:.0f}% of {memory_gib:.0f} GiB)"
        )
        return pred
    # decode: m micro-batches of ceil(batch / m) sequences
    per_mb = -(-wl.batch // m)
    ctx = cache_len(wl.input_len, wl.output_len)
    dec_compute = [compute.decode_ms(shape, tp, pp, s, per_mb, ctx, dbytes) for s in range(pp)]
    pred.decode = _phase(
        shape, tp, pp, m, per_mb, per_mb, dec_compute, comms, placement, dbytes, True, wl.batch,
        None, compute.decode_collective_ms,
    )  # fmt: skip
    # prefill: chunks of whole sequences, at least m of them when pp > 1
    chunks = prefill_chunks(wl.batch, wl.input_len, wl.chunk_tokens, m if pp > 1 else 1)
    seqs = max(r.stop - r.start for r in chunks)
    pre_compute = [
        compute.prefill_ms(shape, tp, pp, s, seqs, wl.input_len, dbytes) for s in range(pp)
    ]
    # gpulane tokens replays a pp=1 prefill from a CUDA graph; a pipeline's stages run
    # each chunk eagerly (their sends between), so the host's launches set a floor
    host = None
    if pp > 1:
        host = [
            compute.prefill_host_ms(shape, tp, pp, s, sends=2 * ((s > 0) + (s < pp - 1)))
            for s in range(pp)
        ]
    pred.prefill = _phase(
        shape, tp, pp, len(chunks), seqs * wl.input_len, seqs, pre_compute, comms, placement,
        dbytes, False, wl.batch * wl.input_len, host,
    )  # fmt: skip
    link, link_source = comms.link(tp, placement.tp_label, placement.tp_gbps)
    pred.rule_decode = _rule(pred.decode, tp, link, link_source)
    pred.rule_prefill = _rule(pred.prefill, tp, link, link_source)
    return pred
