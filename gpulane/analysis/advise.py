"""TP vs PP advice from measurements: an explicit, printed model of one decode step and one
prefill for every TP x PP split of the GPUs that fits in memory.

Inputs (all pure data here; the command gathers them):

- the model's shapes (:mod:`gpulane.inference.shapes`) and the sharding arithmetic
  (:mod:`gpulane.inference.sharding`: 2 all-reduces per layer of hidden x tokens x bytes,
  one more for the vocabulary-parallel embedding, an all-gather of the logits, 2 sends of
  hidden x tokens x bytes between pipeline stages);
- the collective curves of a build (``gpulane sweep`` or nccl-tests rows: time over size,
  interpolated log-log with :class:`gpulane.analysis.join.Curve`, linear in size above the
  largest measured size), or, for a build not measured, curves projected from the
  topology's expected path bandwidth (:mod:`gpulane.topology.bandwidth`);
- the topology: TP groups are placed on the GPUs that share the best paths;
- compute per stage: a roofline (weight and KV bytes / HBM bandwidth for decode, FLOPs /
  matrix rate for prefill), optionally calibrated on a measured ``gpulane tokens`` run
  (its compute-only times, ``extra.compute_only_ms``).

The model (printed by the command, :data:`MODEL_TEXT`):

- a stage's time for a micro-batch = compute + its TP collectives (no overlap of the
  all-reduces with compute: each sits between two matmuls on the critical path);
- decode step = max(m x slowest stage, sum of stage times + sends), with m micro-batches
  in flight (m = pp, capped at the batch, as ``gpulane tokens`` runs them);
- prefill (= TTFT) = (k - 1) x slowest stage + sum of stage times + sends, for k chunks of
  whole sequences (at most ``chunk_tokens`` tokens, at least m chunks when pp > 1);
- sends between stages overlap other micro-batches' compute in the steady state, and
  count on the fill path and on a micro-batch's round trip.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpulane.analysis.join import Curve, build_curves
from gpulane.errors import InputError
from gpulane.inference.memory import OVERHEAD_BYTES, GiB, MemoryEstimate, cache_len, estimate
from gpulane.inference.runner.plan import prefill_chunks
from gpulane.inference.shapes import ModelShape
from gpulane.inference.sharding import (
    CommCall,
    check_parallel,
    rank_slices,
    stage_layers,
    stage_params,
    step_comm,
)
from gpulane.topology.bandwidth import expected_pair_gbps
from gpulane.topology.model import Gpu, Pair, PcieLink, Topology
from gpulane.topology.paths import label_badness, label_kind, nvlink_count, worst_label
from gpulane.units import PCIE_LANE_GBPS

RULE_OF_THUMB = 0.70  # the seed document: needed bandwidth above 70% of the link: trouble
TOKEN_BYTES = 8  # sampled token ids (int64) sent back from the last stage to the first

# Which measured rows to trust first for a collective inside a step: CUDA-graph replays
# (how decode runs), then nccl-tests' back-to-back device timing, then the others.
BACKEND_ORDER = ("nccl-tests", "nccl", "torch-nccl", "mpi")

MODEL_TEXT = """\
model (per GPU; TP all-reduces do not overlap compute, pipeline sends do):
  stage time  = compute of its layers + its TP collectives
                (2 all-reduces per layer of hidden x tokens x bytes, +1 on the first stage
                 for the embedding, an all-gather of the logits on the last)
  decode step = max(m x slowest stage, sum of stages + sends)       m micro-batches in flight
                tokens = batch / m per micro-batch; sends: 2 x hidden x tokens x bytes per
                stage boundary, and the sampled tokens back to stage 0
  prefill     = (k - 1) x slowest stage + sum of stages + sends    k chunks of whole sequences
                tokens = sequences x input_len per chunk; TTFT = prefill of the whole batch
  decode tok/s = batch / step; prefill tok/s = batch x input_len / TTFT
  collective times: measured curves of the build, interpolated log-log over size (linear
  in size above the largest measured size), where the ranks' path is the measured one;
  otherwise projected: latency + size x busbw factor / (efficiency x path GB/s)"""


# -- GPUs and compute ------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSpec:
    """What the roofline needs of one GPU model. GB/s = 1e9 B/s, TFLOP/s = 1e12."""

    name: str
    hbm_gbps: float  # achievable HBM bandwidth (read + write)
    tflops: float  # achievable dense matrix rate at the model's dtype
    memory_gib: float
    source: str = "config"


def gpu_spec(
    specs: Mapping[str, Mapping[str, Any]],
    model: str | None,
    hbm_gbps: float | None = None,
    tflops: float | None = None,
    memory_gib: float | None = None,
) -> GpuSpec:
    """The spec of ``model`` (a key of ``specs`` contained in the name, longest first),
    with overrides applied; InputError when nothing is known and nothing given."""
    base: Mapping[str, Any] = {}
    name = model or "unknown GPU"
    if model:
        for key in sorted(specs, key=len, reverse=True):
            if key.lower() in model.lower():
                base, name = specs[key], key
                break
    values = {
        "hbm_gbps": hbm_gbps if hbm_gbps is not None else base.get("hbm_gbps"),
        "tflops": tflops if tflops is not None else base.get("tflops"),
        "memory_gib": memory_gib if memory_gib is not None else base.get("memory_gib"),
    }
    missing = [k for k, v in values.items() if v is None]
    given = {k: float(v) for k, v in values.items() if v is not None}
    if missing:
        known = ", ".join(specs) or "none"
        raise InputError(
            f"advise: no {', '.join(missing)} for GPU {model or '(unknown)'}; set gpu=NAME "
            f"(known: {known}) or give {', '.join(f'{k}=' for k in missing)}"
        )
    overridden = [
        k
        for k, v in (("hbm_gbps", hbm_gbps), ("tflops", tflops), ("memory_gib", memory_gib))
        if v is not None
    ]
    source = "config" + (f", {', '.join(overridden)} given" if overridden else "")
    return GpuSpec(
        name=name,
        hbm_gbps=given["hbm_gbps"],
        tflops=given["tflops"],
        memory_gib=given["memory_gib"],
        source=source,
    )


def _matmul_params(shape: ModelShape, tp: int, pp: int, stage: int) -> tuple[int, int]:
    """(weights a token multiplies in the stage's layers, LM-head rows x hidden) on one
    rank; for MoE layers only the top-k experts (and shared experts) count."""
    s = rank_slices(shape, tp)
    h = shape.hidden_size
    n = 0
    for layer in stage_layers(shape.num_layers, pp)[stage]:
        n += h * s.qkv_out + s.o_in * h
        if shape.is_moe_layer(layer):
            n += shape.num_experts * h + shape.top_k * 3 * h * s.moe_intermediate
            n += 3 * h * s.shared_intermediate
        else:
            n += 3 * h * s.intermediate
    head = s.vocab * h if stage == pp - 1 else 0
    return n, head


@dataclass(frozen=True)
class Compute:
    """Compute time of one stage on one GPU: a roofline times a calibration factor, plus
    a fixed time per layer (calibrated across TP degrees; 0 for the plain roofline).

    Why the fixed term: at small batches a layer's norms, rotary, cache writes and
    attention are a dozen short kernels whose time does not shrink with TP, so a step
    that is 70 % weight reads at TP=1 does not halve at TP=2."""

    gpu: GpuSpec
    decode_scale: float = 1.0
    prefill_scale: float = 1.0
    source: str = "roofline"
    decode_layer_ms: float = 0.0
    prefill_layer_ms: float = 0.0

    def decode_ms(
        self, shape: ModelShape, tp: int, pp: int, stage: int, seqs: int, ctx: int, dbytes: int
    ) -> float:
        """One decode step of ``seqs`` sequences with ``ctx`` cached positions: the stage's
        weights and KV cache read once, or its FLOPs, whichever takes longer."""
        s = rank_slices(shape, tp)
        layers = len(stage_layers(shape.num_layers, pp)[stage])
        weights = stage_params(shape, tp, pp, stage) * dbytes
        kv = layers * 2 * s.kv_size * seqs * ctx * dbytes
        body, head = _matmul_params(shape, tp, pp, stage)
        flops = 2 * (body + head) * seqs + 4 * layers * seqs * ctx * s.q_size
        t = max((weights + kv) / (self.gpu.hbm_gbps * 1e9), flops / (self.gpu.tflops * 1e12))
        return t * 1e3 * self.decode_scale + layers * self.decode_layer_ms

    def prefill_ms(
        self, shape: ModelShape, tp: int, pp: int, stage: int, seqs: int, input_len: int,
        dbytes: int,
    ) -> float:  # fmt: skip
        """One prefill chunk of ``seqs`` whole sequences: FLOPs of the matmuls and causal
        attention, or the weights read once, whichever takes longer."""
        s = rank_slices(shape, tp)
        layers = len(stage_layers(shape.num_layers, pp)[stage])
        tokens = seqs * input_len
        body, head = _matmul_params(shape, tp, pp, stage)
        attn = 4 * layers * seqs * input_len * input_len / 2 * s.q_size
        flops = 2 * body * tokens + 2 * head * seqs + attn
        weights = stage_params(shape, tp, pp, stage) * dbytes
        t = max(flops / (self.gpu.tflops * 1e12), weights / (self.gpu.hbm_gbps * 1e9))
        return t * 1e3 * self.prefill_scale + layers * self.prefill_layer_ms


def _f(value: Any) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def calibrate(
    compute: Compute,
    shape: ModelShape,
    token_rows: Iterable[Mapping[str, Any]],
    batch: int,
    input_len: int,
    dbytes: int,
) -> Compute:
    """``compute`` fitted to the compute-only times of measured ``gpulane tokens`` runs of
    this model (pp=1 rows; TP collectives as no-ops, or tp=1).

    Rows at this batch and input length are used when there are some, else all rows of
    the model. With rows at one TP degree: the roofline times the median factor. With
    rows at two or more: time = a x roofline + b x layers, least squares over the TP
    degrees (a > 0, b >= 0), so that the part that does not split across GPUs is known.
    Returns ``compute`` unchanged when no row fits."""
    factors: dict[str, list[tuple[bool, float, str, int, float, float, int]]] = {
        "decode": [],
        "prefill": [],
    }
    for r in token_rows:
        if r.get("kind") != "tokens" or (r.get("status") or "ok") != "ok":
            continue
        if r.get("model") != shape.name or int(_f(r.get("pp")) or 0) != 1:
            continue
        op = r.get("op")
        if op not in factors:
            continue
        tp = int(_f(r.get("tp")) or 1)
        extra = r.get("extra") if isinstance(r.get("extra"), dict) else {}
        assert isinstance(extra, dict)
        measured = _f(extra.get("compute_only_ms"))
        if measured is None and tp == 1:
            measured = (_f(r.get("time_us")) or 0) / 1e3 or None
        b, i = _f(r.get("batch")), _f(r.get("input_len"))
        if measured is None or b is None or i is None:
            continue
        b_, i_ = int(b), int(i)
        layers = int(_f(r.get("layers")) or shape.num_layers)
        run_shape = shape.with_layers(layers)
        try:
            check_parallel(run_shape, tp, 1)
        except InputError:
            continue
        base = Compute(compute.gpu)
        if op == "decode":
            o = int(_f(r.get("output_len")) or 1)
            roof = base.decode_ms(run_shape, tp, 1, 0, b_, cache_len(i_, o), dbytes)
        else:
            k = int(_f(extra.get("prefill_chunks")) or 1)
            per = -(-b_ // k)
            roof = k * base.prefill_ms(run_shape, tp, 1, 0, per, i_, dbytes)
        if roof <= 0:
            continue
        where = f"{r.get('run_id')} tp={tp} batch {b_} in {i_}: {measured:.2f} ms"
        here = b_ == batch and i_ == input_len
        factors[op].append((here, measured / roof, where, tp, roof, measured, layers))
    scales: dict[str, float] = {}
    fixed: dict[str, float] = {}
    notes: list[str] = []
    for op, found in factors.items():
        if not found:
            continue
        same = [f for f in found if f[0]] or found
        fit = _fit_two_terms([(f[4], f[5], f[6]) for f in same])
        if len({f[3] for f in same}) > 1 and fit is not None:
            scales[op], fixed[op] = fit
            tps = ",".join(str(t) for t in sorted({f[3] for f in same}))
            notes.append(
                f"{op} x{fit[0]:.2f} + {fit[1] * 1e3:.1f} us/layer (fitted over tp={tps}, "
                f"{len(same)} rows)"
            )
            continue
        values = sorted(f[1] for f in same)
        scales[op] = values[len(values) // 2]
        notes.append(f"{op} x{scales[op]:.2f} ({same[len(same) // 2][2]})")
    if not scales:
        return compute
    return Compute(
        compute.gpu,
        decode_scale=scales.get("decode", compute.decode_scale),
        prefill_scale=scales.get("prefill", compute.prefill_scale),
        source="roofline calibrated on tokens runs: " + "; ".join(notes),
        decode_layer_ms=fixed.get("decode", compute.decode_layer_ms),
        prefill_layer_ms=fixed.get("prefill", compute.prefill_layer_ms),
    )


def _fit_two_terms(points: list[tuple[float, float, int]]) -> tuple[float, float] | None:
    """Least squares of measured = a x roofline + b x layers over (roofline, measured,
    layers) points; None unless a > 0 and b >= 0 (then the plain factor is used)."""
    sxx = sum(r * r for r, _, _ in points)
    sxl = sum(r * n for r, _, n in points)
    sll = sum(n * n for _, _, n in points)
    sxy = sum(r * m for r, m, _ in points)
    sly = sum(n * m for _, m, n in points)
    det = sxx * sll - sxl * sxl
    if abs(det) < 1e-12 * max(sxx * sll, 1e-30):
        return None
    a = (sxy * sll - sly * sxl) / det
    b = (sxx * sly - sxl * sxy) / det
    if a <= 0 or b < 0:
        return None
    return a, b


# -- collective times ------------------------------------------------------------------


@dataclass(frozen=True)
class CommTime:
    time_us: float
    source: str  # "measured ...", "projected ..."
    extrapolated: bool = False


def curve_time(curve: Curve, size: int) -> tuple[float, bool]:
    """Time at ``size`` on a measured curve: log-log inside (Curve.at), the smallest
    size's time below (latency-bound), linear in size above the largest (bandwidth-bound).
    The flag says the size was outside the measured range."""
    if size > curve.sizes[-1]:
        return curve.times_us[-1] * size / curve.sizes[-1], True
    t, _bw, outside = curve.at(size)
    return t, outside


def busbw_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def _clean(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with pandas' missing values (NaN, NA) as None."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if (isinstance(v, float) and math.isnan(v)) or v.__class__.__name__ in (
            "NAType",
            "NaTType",
        ):
            v = None
        out[str(k)] = v
    return out


@dataclass
class _Group:
    label: str
    curve: Curve
    paths: frozenset[str]


class MeasuredComm:
    """Collective curves of one build, per (op, ranks), from result rows.

    Rows are grouped by (backend, graph) and each group's curve is built by
    :func:`gpulane.analysis.join.build_curves` (median per size, bf16 preferred). A size is
    timed on the first group, in order of preference (graph replays, then
    :data:`BACKEND_ORDER`), whose measured range covers it; else on the group that reaches
    the largest size (linear in size beyond it).
    Send times come from ``sendrecv`` rows, else from a 2-rank all_gather of twice the
    message (each rank sends half of the gathered buffer), else from nothing.
    """

    def __init__(self, rows: Iterable[Mapping[str, Any]], build: str | None = None) -> None:
        coll = [_clean(r) for r in rows if r.get("kind") == "collective"]
        builds = sorted({str(r.get("build")) for r in coll})
        if build is None and len(builds) > 1:
            raise InputError(
                f"advise: the collective rows hold several builds ({', '.join(builds)}); "
                "choose one with build=LABEL"
            )
        self.build = build if build is not None else (builds[0] if builds else None)
        coll = [r for r in coll if str(r.get("build")) == str(self.build)]
        self.groups: dict[tuple[str, int], list[_Group]] = {}
        by_group: dict[tuple[str, bool], list[dict[str, Any]]] = {}
        for r in coll:
            by_group.setdefault((str(r.get("backend")), bool(r.get("graph"))), []).append(r)

        def rank(key: tuple[str, bool]) -> tuple[int, int, str]:
            backend, graph = key
            order = BACKEND_ORDER.index(backend) if backend in BACKEND_ORDER else 99
            return (0 if graph else 1, order, backend)

        for key in sorted(by_group, key=rank):
            group_rows = by_group[key]
            # build_curves keeps all_reduce/all_gather only: sendrecv curves ride along
            # under a stand-in op name and are put back under their own.
            stand_in = [
                {**r, "op": "all_reduce", "build": "sendrecv"}
                for r in group_rows
                if r.get("op") == "sendrecv"
            ]
            curves = build_curves([*group_rows, *stand_in])
            for (b, op, n), curve in curves.items():
                name = "sendrecv" if b == "sendrecv" else op
                paths = frozenset(
                    str(r["path"])
                    for r in group_rows
                    if r.get("path") and r.get("op") == name and r.get("world_size") == n
                )
                label = f"{key[0]}{' graph' if key[1] else ''} {curve.dtype or ''}".strip()
                self.groups.setdefault((name, n), []).append(_Group(label, curve, paths))

    def peak_busbw(self, op: str, n: int) -> float | None:
        """The largest bus bandwidth measured for ``op`` over ``n`` ranks (GB/s)."""
        best = None
        for g in self.groups.get((op, n), []):
            for size, t in zip(g.curve.sizes, g.curve.times_us, strict=True):
                bw = size / (t * 1e3) * busbw_factor(op, n)
                best = bw if best is None or bw > best else best
        return best

    def has(self, op: str, n: int) -> bool:
        return bool(self.groups.get((op, n)))

    def paths(self, op: str, n: int) -> frozenset[str]:
        return frozenset().union(*(g.paths for g in self.groups.get((op, n), [])))

    def time(self, op: str, n: int, size: int) -> CommTime | None:
        groups = self.groups.get((op, n))
        if op == "send" and n == 2:
            if self.has("sendrecv", 2):
                return self.time("sendrecv", 2, size)
            got = self.time("all_gather", 2, 2 * size)
            if got is None:
                return None
            return CommTime(
                got.time_us, got.source + " (as 2-rank all_gather of 2x)", got.extrapolated
            )
        if not groups:
            return None
        chosen = next((g for g in groups if g.curve.sizes[0] <= size <= g.curve.sizes[-1]), None)
        if chosen is None:  # outside every range: the one that reaches closest
            below = size < min(g.curve.sizes[0] for g in groups)
            chosen = groups[0] if below else max(groups, key=lambda g: g.curve.sizes[-1])
        t, outside = curve_time(chosen.curve, size)
        return CommTime(t, f"measured {chosen.label}", outside)


@dataclass(frozen=True)
class Projection:
    """Collective time from a path's expected bandwidth: latency + bytes / bandwidth."""

    efficiency: Mapping[str, float]  # path kind (nvlink, pcie) -> fraction of line rate
    latency_us: Mapping[str, float]  # path kind -> per-call latency

    def time(self, op: str, n: int, size: int, label: str | None, gbps: float | None) -> CommTime:
        if gbps is None or label is None:
            raise InputError(
                f"advise: no measured {op} over {n} ranks and no expected bandwidth for the "
                "path to project it from; give run=/build= with that collective, or "
                "topology= (a gpulane topo --json file) to project from"
            )
        kind = "nvlink" if label_kind(label) == "nvlink" else "pcie"
        eff = float(self.efficiency.get(kind, 1.0))
        lat = float(self.latency_us.get(kind, 10.0))
        t = lat + size * busbw_factor(op, n) / (eff * gbps * 1e3)
        return CommTime(t, f"projected {label} {gbps:.1f} GB/s x {eff:.2f}")


# -- topology and placement ------------------------------------------------------------


def topology_from_json(data: Mapping[str, Any]) -> Topology:
    """A :class:`Topology` from what ``gpulane topo --json`` writes (DESIGN.md)."""

    def link(d: Any) -> PcieLink | None:
        if not isinstance(d, Mapping):
            return None
        return PcieLink(
            gen=d.get("gen"),
            gen_max=d.get("gen_max"),
            width=d.get("width"),
            width_max=d.get("width_max"),
            downtrained=d.get("downtrained"),
        )

    gpus = []
    for i, g in enumerate(data.get("gpus") or []):
        nvl = g.get("nvlinks") or {}
        gpus.append(
            Gpu(
                name=str(g.get("name") or f"GPU{i}"),
                index=int(g.get("index", i)),
                bus_id=g.get("bus_id"),
                model=g.get("model"),
                numa=g.get("numa"),
                pcie=link(g.get("pcie")),
                upstream=[x for x in (link(u) for u in g.get("pcie_upstream") or []) if x],
                nvlink_gbps={int(k): v for k, v in nvl.items()} if isinstance(nvl, dict) else {},
            )
        )
    pairs = [
        Pair(
            a=str(p["a"]),
            b=str(p["b"]),
            label=str(p["label"]),
            kind=str(p.get("kind") or label_kind(str(p["label"]))),
            nvlinks=p.get("nvlinks"),
        )
        for p in data.get("pairs") or []
        if p.get("a") and p.get("b") and p.get("label")
    ]
    return Topology(gpus=gpus, pairs=pairs, warnings=list(data.get("warnings") or []))


def synthetic_topology(n: int, model: str | None) -> Topology:
    """``n`` GPUs of ``model`` with nothing known about their links."""
    return Topology(gpus=[Gpu(name=f"GPU{i}", index=i, model=model) for i in range(n)])


_WHAT_IF = re.compile(r"^(?:(pcie):(?:gen)?(\d)x(\d{1,2})|(nvlink):(\d{1,2}))$", re.IGNORECASE)


def apply_what_if(topo: Topology, spec: str) -> tuple[Topology, str]:
    """The topology with every GPU moved: ``pcie:3x4`` (PCIe Gen3 x4 links, e.g. risers,
    and no NVLink between the GPUs: pairs through the host bridge, PHB), or ``nvlink:18``
    (every pair of GPUs bonded by 18 NVLinks). Returns (topology, description)."""
    m = _WHAT_IF.match(spec.strip())
    if not m:
        raise InputError(
            f"what_if: expected pcie:GENxWIDTH (e.g. pcie:3x4) or nvlink:LINKS (e.g. "
            f"nvlink:18), got {spec!r}"
        )
    out = copy.deepcopy(topo)
    names = [g.name for g in out.gpus]
    if m.group(1):
        gen, width = int(m.group(2)), int(m.group(3))
        if gen not in PCIE_LANE_GBPS:
            raise InputError(f"what_if: PCIe Gen{gen} is not one of {sorted(PCIE_LANE_GBPS)}")
        for g in out.gpus:
            g.pcie = PcieLink(gen=gen, gen_max=gen, width=width, width_max=width)
            g.upstream = []
            g.nvlink_gbps = {}
        keep = {
            (p.a, p.b): p
            for p in out.pairs
            if p.a in names and p.b in names and nvlink_count(p.label) is None
        }
        label_of = {k: p.label for k, p in keep.items()}
        desc = f"every GPU on PCIe Gen{gen} x{width}, no NVLink (projection)"
    else:
        links = int(m.group(5))
        label_of = {}
        desc = f"every GPU pair on {links} NVLinks (projection)"
    others = [p for p in out.pairs if not (p.a in names and p.b in names)]
    pairs = []
    for a, b in itertools.combinations(names, 2):
        if m.group(1):
            label = label_of.get((a, b)) or label_of.get((b, a)) or "PHB"
            pairs.append(Pair(a=a, b=b, label=label, kind=label_kind(label)))
        else:
            pairs.append(Pair(a=a, b=b, label=f"NV{links}", kind="nvlink", nvlinks=links))
    out.pairs = pairs + others
    return out, desc


@dataclass(frozen=True)
class Placement:
    groups: tuple[tuple[str, ...], ...]  # TP groups, in stage order
    tp_label: str | None  # worst path inside a TP group
    tp_gbps: float | None
    pp_label: str | None  # worst path between neighbouring stages
    pp_gbps: float | None

    def describe(self) -> str:
        return " | ".join("+".join(g) for g in self.groups)


def _partitions(items: Sequence[str], size: int) -> Iterable[list[tuple[str, ...]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for others in itertools.combinations(rest, size - 1):
        group = (first, *others)
        left = [x for x in rest if x not in others]
        for tail in _partitions(left, size):
            yield [group, *tail]


def _pair_label(topo: Topology, a: str, b: str) -> str | None:
    p = topo.pair(a, b)
    return p.label if p else None


def _worst(topo: Topology, pairs: Iterable[tuple[str, str]]) -> tuple[str | None, float | None]:
    labels, rates = [], []
    for a, b in pairs:
        label = _pair_label(topo, a, b)
        if label is None:
            return None, None
        labels.append(label)
        rates.append(expected_pair_gbps(topo, a, b))
    if not labels:
        return None, None
    known = [r for r in rates if r is not None]
    return worst_label(labels), (min(known) if len(known) == len(rates) else None)


def place(topo: Topology, gpus: int, tp: int, pp: int) -> Placement:
    """TP groups on the GPUs that share the best paths (the worst path inside any group as
    good as it can be), stages ordered so that neighbours are as close as they can be."""
    names = [g.name for g in sorted(topo.gpus, key=lambda g: g.index)][:gpus]
    if len(names) < gpus:
        raise InputError(f"advise: gpus={gpus} but the topology has {len(names)} GPUs")
    if not topo.pairs:
        groups = tuple(tuple(names[s * tp : (s + 1) * tp]) for s in range(pp))
        return Placement(groups, None, None, None, None)

    def inner(parts: Sequence[tuple[str, ...]]) -> list[tuple[str, str]]:
        return [pair for g in parts for pair in itertools.combinations(g, 2)]

    def cross(parts: Sequence[tuple[str, ...]]) -> list[tuple[str, str]]:
        return [(a, b) for x, y in itertools.pairwise(parts) for a, b in zip(x, y, strict=True)]

    def badness(label: str | None, gbps: float | None) -> tuple[tuple[int, int], float]:
        return (label_badness(label) if label else (99, 0), -(gbps or 0.0))

    best: tuple[Any, ...] | None = None
    chosen: list[tuple[str, ...]] = []
    for count, parts in enumerate(_partitions(names, tp)):
        if count >= 5000:
            break
        orders = itertools.permutations(parts) if pp <= 4 else [tuple(parts)]
        for order in orders:
            tl, tg = _worst(topo, inner(order))
            pl, pg = _worst(topo, cross(order))
            key = (badness(tl, tg), badness(pl, pg))
            if best is None or key < best:
                best, chosen = key, list(order)
    tl, tg = _worst(topo, inner(chosen))
    pl, pg = _worst(topo, cross(chosen))
    return Placement(tuple(chosen), tl, tg, pl, pg)


# -- the prediction --------------------------------------------------------------------


@dataclass
class Comms:
    """Where a collective's time comes from: measured curves of the build where they
    cover the op, ranks and path, else the projection from the placement's paths."""

    measured: MeasuredComm | None
    projection: Projection
    projected_only: bool = False  # what-if: never use the measured curves

    def time(self, op: str, n: int, size: int, label: str | None, gbps: float | None) -> CommTime:
        m = self.measured
        if m is not None and not self.projected_only:
            if op == "send":
                paths = m.paths("sendrecv" if m.has("sendrecv", 2) else "all_gather", 2)
            else:
                paths = m.paths(op, n)
            if label is None or not paths or label in paths:
                got = m.time(op, n, size)
                if got is not None:
                    return got
        return self.projection.time(op, n, size, label, gbps)

    def link(self, n: int, label: str | None, gbps: float | None) -> tuple[float | None, str]:
        """The bandwidth the rule of thumb compares with: the build's peak measured
        all-reduce bus bandwidth over ``n`` ranks where measured, else the path's."""
        m = self.measured
        if m is not None and not self.projected_only:
            paths = m.paths("all_reduce", n)
            if label is None or not paths or label in paths:
                peak = m.peak_busbw("all_reduce", n)
                if peak is not None:
                    return peak, "peak measured all-reduce busbw"
        return gbps, f"expected {label} bandwidth" if label else "unknown"


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
    comms: Comms, calls: list[CommCall], tp: int, placement: Placement
) -> tuple[float, float, list[dict[str, Any]], list[str]]:
    """(TP collective ms, send ms, calls with their times, sources) of one stage's calls."""
    coll = sends = 0.0
    out, sources = [], []
    for c in calls:
        if c.op == "send":
            t = comms.time("send", 2, c.size_bytes, placement.pp_label, placement.pp_gbps)
            sends += c.count * t.time_us / 1e3
        else:
            t = comms.time(c.op, tp, c.size_bytes, placement.tp_label, placement.tp_gbps)
            coll += c.count * t.time_us / 1e3
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
) -> Phase:
    stage_ms, coll_ms, send_ms = [], [], 0.0
    all_calls: list[dict[str, Any]] = []
    sources: list[str] = []
    for s in range(pp):
        calls = step_comm(shape, tp, pp, tokens, rows, dbytes, s)
        coll, sends, detail, src = _stage_comm(comms, calls, tp, placement)
        if decode and pp > 1 and s == pp - 1:  # sampled tokens back to stage 0
            t = comms.time("send", 2, rows * TOKEN_BYTES, placement.pp_label, placement.pp_gbps)
            sends += t.time_us / 1e3
        stage_ms.append(compute_ms[s] + coll)
        coll_ms.append(coll)
        send_ms += sends
        all_calls += [{**d, "stage": s} for d in detail]
        sources += [x for x in src if x not in sources]
    slow = max(range(pp), key=lambda s: stage_ms[s])
    chain = sum(stage_ms) + send_ms
    # decode: m micro-batches in flight, each returning to stage 0 before its next step;
    # prefill: chunks stream through the stages one after the other
    total = max(units * stage_ms[slow], chain) if decode else (units - 1) * stage_ms[slow] + chain
    busy = units * stage_ms[slow]
    return Phase(
        time_ms=total,
        tokens_per_s=total_tokens / (total / 1e3),
        compute_ms=compute_ms[slow],
        allreduce_ms=coll_ms[slow],
        send_ms=send_ms,
        stage_ms=stage_ms[slow],
        units=units,
        tokens=tokens,
        allreduce_share=units * coll_ms[slow] / total if total else 0.0,
        bubble_share=max(0.0, 1.0 - busy / total) if total else 0.0,
        calls=all_calls,
        sources=sources,
    )


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
        shape, tp, pp, m, per_mb, per_mb, dec_compute, comms, placement, dbytes, True, wl.batch
    )
    # prefill: chunks of whole sequences, at least m of them when pp > 1
    chunks = prefill_chunks(wl.batch, wl.input_len, wl.chunk_tokens, m if pp > 1 else 1)
    seqs = max(r.stop - r.start for r in chunks)
    pre_compute = [
        compute.prefill_ms(shape, tp, pp, s, seqs, wl.input_len, dbytes) for s in range(pp)
    ]
    pred.prefill = _phase(
        shape, tp, pp, len(chunks), seqs * wl.input_len, seqs, pre_compute, comms, placement,
        dbytes, False, wl.batch * wl.input_len,
    )  # fmt: skip
    link, link_source = comms.link(tp, placement.tp_label, placement.tp_gbps)
    pred.rule_decode = _rule(pred.decode, tp, link, link_source)
    pred.rule_prefill = _rule(pred.prefill, tp, link, link_source)
    return pred


# -- recommendation --------------------------------------------------------------------


@dataclass
class Recommendation:
    goal: str  # latency or throughput
    batch: int
    choice: Prediction | None
    reasons: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "goal": self.goal,
            "batch": self.batch,
            "split": self.choice.name if self.choice else None,
            "tp": self.choice.tp if self.choice else None,
            "pp": self.choice.pp if self.choice else None,
            "reasons": list(self.reasons),
        }


def _path_text(label: str | None, gbps: float | None) -> str:
    if label is None:
        return "the measured path"
    return f"{label}" + (f" ({gbps:.0f} GB/s)" if gbps else "")


def explain(p: Prediction, build: str) -> str:
    """What one split's decode step is made of, in words."""
    d = p.decode
    assert d is not None
    parts = [f"{p.name}: decode step {d.time_ms:.2f} ms"]
    if p.tp > 1:
        parts.append(
            f"{100 * d.allreduce_share:.0f}% of it in all-reduce over "
            f"{_path_text(p.placement.tp_label, p.placement.tp_gbps)} on {build}"
        )
    if p.pp > 1:
        how = (
            "one micro-batch: the stages take turns"
            if p.micro_batches == 1
            else f"{p.micro_batches} micro-batches, each reading its stage's weights again"
        )
        parts.append(f"{100 * d.bubble_share:.0f}% pipeline bubble and sends ({how})")
    if p.prefill is not None and p.tp > 1:
        parts.append(f"prefill {100 * p.prefill.allreduce_share:.0f}% in all-reduce")
    return ", ".join(parts)


def recommend(
    preds: Sequence[Prediction], batches: Sequence[int], build: str
) -> list[Recommendation]:
    """Latency: the shortest request (TTFT + (output_len - 1) x inter-token latency) at the
    smallest batch. Throughput: the most decode tokens/s at the largest batch."""
    out = []
    for goal, batch in (("latency", min(batches)), ("throughput", max(batches))):
        cands = [p for p in preds if p.batch == batch and p.fits and p.decode is not None]
        if not cands:
            out.append(
                Recommendation(goal, batch, None, [f"no split fits in memory at batch {batch}"])
            )
            continue

        def key(p: Prediction, goal: str = goal) -> tuple[float, float]:
            assert p.decode is not None and p.prefill is not None
            if goal == "latency":
                return (p.request_ms or 0.0, p.decode.time_ms)
            return (-p.decode.tokens_per_s, p.prefill.time_ms)

        ranked = sorted(cands, key=key)
        best = ranked[0]
        assert best.decode is not None and best.prefill is not None
        metric = (
            f"{best.request_ms or 0:.0f} ms per request of {best.output_len} tokens"
            if goal == "latency"
            else f"{best.decode.tokens_per_s:.0f} decode tok/s"
        )
        reasons = [
            f"{best.name} for {goal} at batch {batch}: {metric} (TTFT "
            f"{best.prefill.time_ms:.0f} ms, {best.decode.time_ms:.2f} ms per token)",
            explain(best, build),
        ]
        runner_up = next((o for o in ranked if o is not best), None)
        all_tp = next((o for o in ranked if o.pp == 1 and o.tp > 1), None)
        for other in (runner_up, all_tp if all_tp is not runner_up else None):
            if other is None or other is best:
                continue
            assert other.decode is not None
            worse = (
                (other.request_ms or 0.0) / (best.request_ms or 1.0)
                if goal == "latency"
                else best.decode.tokens_per_s / other.decode.tokens_per_s
            )
            reasons.append(f"vs {explain(other, build)} ({worse:.2f}x worse)")
        pl = best.placement
        if (
            best.tp > 1
            and best.pp > 1
            and pl.tp_label
            and pl.pp_label
            and label_badness(pl.tp_label) < label_badness(pl.pp_label)
        ):
            reasons.append(
                f"{best.name} keeps all-reduce on {best.placement.tp_label} "
                f"({best.placement.describe()}); stages talk over {best.placement.pp_label}"
            )
        refused = [p for p in preds if p.batch == batch and not p.fits]
        for p in refused:
            reasons.append(f"{p.name} does not fit: {p.refused}")
        out.append(Recommendation(goal, batch, best, reasons))
    return out
