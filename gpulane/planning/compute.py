"""Compute time of a stage: the roofline of :mod:`gpulane.inference.roofline` at a GPU's
HBM bandwidth and matrix rate, optionally calibrated on measured ``gpulane tokens`` runs
(a factor, and a fixed time per layer when runs at two TP degrees say how much of a step
does not split across GPUs)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpulane.errors import InputError
from gpulane.inference.memory import cache_len
from gpulane.inference.roofline import step_cost
from gpulane.inference.shapes import ModelShape, packaged_shape, shape_from_config
from gpulane.inference.sharding import check_parallel
from gpulane.planning.fixed import DECODE_KERNELS, stage_launches, stage_units
from gpulane.planning.rows import as_rows, extra, num, ok, row_device
from gpulane.record import Row


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


@dataclass(frozen=True)
class Compute:
    """Compute time of one stage on one GPU: a roofline times a calibration factor, plus
    a fixed time per unit of work the roofline does not see (:mod:`~gpulane.planning.fixed`:
    kernels in a decode step, GB of elementwise traffic in a prefill; calibrated across TP
    degrees, 0 for the plain roofline).

    Why the fixed term: at small batches a layer's norms, rotary, cache writes and
    attention are a dozen short kernels whose time does not shrink with TP, so a step
    that is 70 % weight reads at TP=1 does not halve at TP=2. Counted in kernels (not
    layers), the time fitted on one model carries over to a model with other layers: the
    same per dense layer, about twice per mixture-of-experts layer, fewer when compiled."""

    gpu: GpuSpec
    decode_scale: float = 1.0
    prefill_scale: float = 1.0
    source: str = "roofline"
    decode_unit_ms: float = 0.0  # per kernel of a decode step
    prefill_unit_ms: float = 0.0  # per GB of a prefill's elementwise traffic
    # per kernel a prefill chunk launches (whatever its tokens): what a chunk costs the
    # GPU beyond its roofline and traffic (the experts' grouped products over a few
    # tokens each, tails), so that a pipeline's smaller chunks are not taken as cheaper
    # in proportion to their tokens
    prefill_kernel_ms: float = 0.0
    compiled: bool = False  # the kernel counts of gpulane tokens compile=true
    # the host's time to issue one kernel / one TP collective of an eager prefill (0: not
    # known, or the calibration runs were never host-bound): a pipeline's prefill chunks
    # run eagerly, and a chunk of a few hundred tokens on a few layers can take the GPU
    # less time than the host takes to launch it
    host_kernel_ms: float = 0.0
    host_collective_ms: float = 0.0
    # what each TP collective of a decode step costs beyond its measured curve (0: the
    # curve alone), fitted by :mod:`~gpulane.planning.step_collectives`
    decode_collective_ms: float = 0.0
    # (model, device) of the token rows the fit used: another model's rows carry over
    # with an error of their own (gpulane.planning.uncertainty.basis_of)
    calibrated_on: tuple[tuple[str, str], ...] = ()

    def decode_ms(
        self, shape: ModelShape, tp: int, pp: int, stage: int, seqs: int, ctx: int, dbytes: int
    ) -> float:
        """One decode step of ``seqs`` sequences with ``ctx`` cached positions: the bytes
        the stage moves (weights, embedding rows, KV cache, activations) or its FLOPs,
        whichever takes longer."""
        cost = step_cost(shape, "decode", seqs, ctx, dbytes, tp, pp, stage)
        t = cost.time_s(self.gpu.hbm_gbps, self.gpu.tflops) * 1e3 * self.decode_scale
        if self.decode_unit_ms:
            units = stage_units(shape, tp, pp, stage, "decode", seqs, self.compiled, dbytes)
            t += units * self.decode_unit_ms
        return t

    def prefill_host_ms(
        self, shape: ModelShape, tp: int, pp: int, stage: int, sends: int = 0
    ) -> float:
        """The host's floor for one eager prefill chunk of ``stage``: its kernels and TP
        collectives (and ``sends`` pipeline sends and receives, at a collective's cost)."""
        if not (self.host_kernel_ms or self.host_collective_ms):
            return 0.0
        kernels, colls = stage_launches(shape, tp, pp, stage, self.compiled)
        return kernels * self.host_kernel_ms + (colls + sends) * self.host_collective_ms

    def prefill_ms(
        self, shape: ModelShape, tp: int, pp: int, stage: int, seqs: int, input_len: int,
        dbytes: int,
    ) -> float:  # fmt: skip
        """One prefill chunk of ``seqs`` whole sequences: FLOPs of the matmuls and causal
        attention, or the bytes the stage moves, whichever takes longer."""
        cost = step_cost(shape, "prefill", seqs, input_len, dbytes, tp, pp, stage)
        t = cost.time_s(self.gpu.hbm_gbps, self.gpu.tflops) * 1e3 * self.prefill_scale
        if self.prefill_unit_ms:
            tokens = seqs * input_len
            units = stage_units(shape, tp, pp, stage, "prefill", tokens, self.compiled, dbytes)
            t += units * self.prefill_unit_ms
        if self.prefill_kernel_ms:
            t += stage_launches(shape, tp, pp, stage, self.compiled)[0] * self.prefill_kernel_ms
        return t


_f = num  # a row's number, None where missing (NaN, NA, text)


@dataclass(frozen=True)
class _Point:
    here: bool  # at the workload's batch and input length
    factor: float  # measured / roofline
    where: str
    tp: int
    roofline_ms: float
    measured_ms: float
    units: float
    kernels: float = 0.0  # prefill: kernels launched over the row's chunks


def _row_shape(row: Row, target: ModelShape) -> ModelShape | None:
    """The shape a tokens row ran: the target's when it is the same model, else the shape
    the row carries (extra.shape) or the packaged model config of that name."""
    name = row.model
    if name == target.name:
        return target
    shape = extra(row).get("shape")
    if isinstance(shape, dict):
        try:
            return shape_from_config({**shape, "name": name})
        except InputError:
            return None
    return packaged_shape(str(name)) if name else None


def _points(
    compute: Compute, shape: ModelShape, rows: list[Row], op: str, batch: int,
    input_len: int, dbytes: int, compiled: bool,
) -> list[_Point]:  # fmt: skip
    base = Compute(compute.gpu)
    found = []
    for r in rows:
        ex = extra(r)
        if r.op != op or bool(ex.get("compile")) != compiled:
            continue
        tp = int(_f(r.tp) or 1)
        measured = _f(ex.get("compute_only_ms"))
        if measured is None and tp == 1:
            measured = (_f(r.time_us) or 0) / 1e3 or None
        b, i = _f(r.batch), _f(r.input_len)
        row_shape = _row_shape(r, shape)
        if measured is None or b is None or i is None or row_shape is None:
            continue
        b_, i_ = int(b), int(i)
        run_shape = row_shape.with_layers(int(_f(r.layers) or row_shape.num_layers))
        try:
            check_parallel(run_shape, tp, 1)
        except InputError:
            continue
        if op == "decode":
            o = int(_f(r.output_len) or 1)
            roof = base.decode_ms(run_shape, tp, 1, 0, b_, cache_len(i_, o), dbytes)
            units = stage_units(run_shape, tp, 1, 0, op, b_, compiled, dbytes)
        else:
            k = int(_f(ex.get("prefill_chunks")) or 1)
            per = -(-b_ // k)
            roof = k * base.prefill_ms(run_shape, tp, 1, 0, per, i_, dbytes)
            units = k * stage_units(run_shape, tp, 1, 0, op, per * i_, compiled, dbytes)
            kernels = k * stage_launches(run_shape, tp, 1, 0, compiled)[0]
        if roof <= 0:
            continue
        where = f"{r.model} {r.run_id} tp={tp} batch {b_} in {i_}: {measured:.2f} ms"
        here = b_ == batch and i_ == input_len
        found.append(_Point(here, measured / roof, where, tp, roof, measured, units,
                            kernels if op == "prefill" else 0.0))  # fmt: skip
    return found


def _fit_rows(token_rows: Iterable[Row | Mapping[str, Any]], shape: ModelShape) -> list[Row]:
    """The pp=1 decode and prefill rows a calibration fits: the model's own where it has
    some, else every model's (carried over by their kernel and traffic counts)."""
    rows = [
        r
        for r in as_rows(token_rows)
        if r.kind == "tokens"
        and ok(r)
        and int(_f(r.pp) or 0) == 1
        and r.op in ("decode", "prefill")
    ]
    own = [r for r in rows if r.model == shape.name]
    return own or rows


def calibrate(
    compute: Compute,
    shape: ModelShape,
    token_rows: Iterable[Row | Mapping[str, Any]],
    batch: int,
    input_len: int,
    dbytes: int,
) -> Compute:
    """``compute`` fitted to the compute-only times of measured ``gpulane tokens`` runs
    (pp=1 rows; TP collectives as no-ops, or tp=1).

    Rows of this model are used when there are some; else rows of other models carry
    over (each row's roofline and fixed units computed on the shape it ran). Rows at this
    batch and input length are used when there are some, else all of them; rows of one
    engine setting (compiled, or not: the one with more rows). With rows at one TP
    degree: the roofline times the median factor. With rows at two or more: time = a x
    roofline + b x fixed units (:mod:`~gpulane.planning.fixed`), least squares over the
    TP degrees (a > 0, b >= 0), so that the part that does not split across GPUs is
    known. Returns ``compute`` unchanged when no row fits."""
    rows = _fit_rows(token_rows, shape)
    flags = [bool(extra(r).get("compile")) for r in rows]
    compiled = flags.count(True) > flags.count(False)
    scales: dict[str, float] = {}
    fixed: dict[str, float] = {}
    notes: list[str] = []
    prefill_kernel_ms = compute.prefill_kernel_ms
    for op in ("decode", "prefill"):
        found = _points(compute, shape, rows, op, batch, input_len, dbytes, compiled)
        if not found:
            continue
        if op == "prefill" and len({f.tp for f in found}) > 1:
            three = _fit_prefill(found)
            if three is not None:
                scales[op], fixed[op], prefill_kernel_ms = three
                tps = ",".join(str(t) for t in sorted({f.tp for f in found}))
                notes.append(
                    f"prefill x{three[0]:.2f} + {_per_unit(op, three[1])} + "
                    f"{1e3 * prefill_kernel_ms:.1f} us per kernel of a chunk (fitted over tp={tps}, "
                    f"{len(found)} rows, {len({(f.roofline_ms, f.units) for f in found})} "
                    "sizes)"
                )
                continue
        same = [f for f in found if f.here] or found
        fit = _fit_two_terms([(f.roofline_ms, f.measured_ms, f.units) for f in same])
        models = sorted({f.where.split(" ")[0] for f in same})
        of = "" if models == [shape.name] else f" on {', '.join(models)}"
        if len({f.tp for f in same}) > 1 and fit is not None:
            scales[op], fixed[op] = fit
            tps = ",".join(str(t) for t in sorted({f.tp for f in same}))
            notes.append(
                f"{op} x{fit[0]:.2f} + {_per_unit(op, fit[1])} (fitted over tp={tps}, "
                f"{len(same)} rows{of})"
            )
            continue
        values = sorted(f.factor for f in same)
        scales[op] = values[len(values) // 2]
        notes.append(f"{op} x{scales[op]:.2f} ({same[len(same) // 2].where})")
    host_k, host_c, host_note = _host_fit(rows, shape, compiled)
    if host_note:
        notes.append(host_note)
    if not scales and not host_note:
        return compute
    return Compute(
        compute.gpu,
        decode_scale=scales.get("decode", compute.decode_scale),
        prefill_scale=scales.get("prefill", compute.prefill_scale),
        source=f"roofline calibrated on {'compiled ' if compiled else ''}tokens runs: "
        + "; ".join(notes),
        decode_unit_ms=fixed.get("decode", compute.decode_unit_ms),
        prefill_unit_ms=fixed.get("prefill", compute.prefill_unit_ms),
        prefill_kernel_ms=prefill_kernel_ms,
        compiled=compiled,
        host_kernel_ms=host_k,
        host_collective_ms=host_c,
        calibrated_on=tuple(sorted({(str(r.model), row_device(r)) for r in rows})),
    )


# An eager prefill this much slower than its graph replay was bound by the host's launches
HOST_BOUND = 1.2


@dataclass(frozen=True)
class _Eager:
    """One pp=1 prefill row that ran an eager prefill beside its graph replay."""

    eager_ms: float  # per chunk, on the GPU's clock
    graph_ms: float  # per chunk, the replay
    host_ms: float | None  # per chunk, the host's clock around the eager call (issue time)
    kernels: int
    colls: int
    where: str


def _eager_rows(rows: list[Row], target: ModelShape, compiled: bool) -> list[_Eager]:
    out = []
    for r in rows:
        ex = extra(r)
        if r.op != "prefill" or bool(ex.get("compile")) != compiled:
            continue
        eager, graph = _f(ex.get("eager_ms")), _f(r.time_us)
        row_shape = _row_shape(r, target)
        if eager is None or graph is None or row_shape is None:
            continue
        run_shape = row_shape.with_layers(int(_f(r.layers) or row_shape.num_layers))
        tp = int(_f(r.tp) or 1)
        chunks = int(_f(ex.get("prefill_chunks")) or 1)
        kernels, colls = stage_launches(run_shape, tp, 1, 0, compiled)
        host = _f(ex.get("eager_host_ms"))
        where = f"{r.model} tp={tp} batch {r.batch} in {r.input_len}"
        out.append(_Eager(eager / chunks, graph / 1e3 / chunks,
                          None if host is None else host / chunks, kernels, colls, where))  # fmt: skip
    return out


def _typical_pace(passes: list[tuple[float, int, int, str]]) -> tuple[float, str]:
    """(ms per launch, what it is) of the host's typical pass: the median over ``passes``
    (host ms, kernels, TP collectives, where) of each one's time per launch, kernels and
    collectives alike.

    Why the median, not the tightest pass: the host's time a launch is not a constant of
    the machine. Round 3b's call timed the same 8-layer eager pass of qwen3-30b-a3b six
    times at 41 to 63 us a launch, in no order of rank count; its host-bound pipeline
    issued at 58 us a launch while the tightest calibration pass said 44. A pipeline runs
    at whatever pace its pass gets, so the typical pass predicts it, the best one does
    not. Kernels and collectives share one cost: the calibration passes differ by 16
    collectives against ~300 kernels, and a pass-to-pass spread of 1.5x over the kernels
    is larger than anything the collectives could be told apart by."""
    paces = sorted((t / max(1, k + c), w) for t, k, c, w in passes)
    n = len(paces)
    mid = paces[n // 2][0] if n % 2 else (paces[n // 2 - 1][0] + paces[n // 2][0]) / 2
    lo, hi = paces[0][0] * 1e3, paces[-1][0] * 1e3
    spread = f"{lo:.1f}-{hi:.1f} us" if n > 1 else f"{lo:.1f} us"
    return mid, f"median of {n} passes at {spread} a launch"


def _host_fit(
    rows: list[Row], target: ModelShape, compiled: bool
) -> tuple[float, float, str | None]:
    """(ms per kernel, ms per TP collective, what was fitted) of the host's launches in an
    eager prefill, from pp=1 prefill rows that timed one eagerly beside the graph replay
    (``extra.eager_ms``), of the model's own rows where it has some: the host's time a
    launch is not the same for every model (round 3's call: the same 313 launches of an
    eager TP=4 pass took the host 16.9 ms for qwen3-30b-a3b, 128 experts, and at most
    12.2 ms for mixtral-8x7b, 8 experts).

    A pass's host time: the host's own clock around the eager call
    (``extra.eager_host_ms``, rank 0's time to issue it, which the GPU's time does not
    hide) where the row has it; and where the eager time is :data:`HOST_BOUND` x its
    replay or more, the eager time itself if longer (the GPUs of a TP pass wait on each
    other at every collective, so a host-bound eager time is the pace of the group's
    slowest host, which rank 0's clock does not see: round 3b's TP=2 pass of qwen3-30b-a3b
    at batch 4 issued in 13.0 ms on rank 0 and ran 18.0 ms eagerly against a 9.2 ms
    replay). The floor is the typical pass's (:func:`_typical_pace`).

    Where no row is clocked or host-bound (every eager prefill GPU-bound) the host's time
    is not known, only bounded: (0, 0) and a note saying so, with the bound, so that the
    printed model says that a pipeline's small chunks may be host-bound at up to that."""
    found = _eager_rows(rows, target, compiled)
    if not found:
        return 0.0, 0.0, None

    def bound(e: _Eager) -> bool:
        return e.eager_ms >= HOST_BOUND * e.graph_ms

    clocked = [
        (max(e.host_ms, e.eager_ms if bound(e) else 0.0), e.kernels, e.colls, e.where)
        for e in found
        if e.host_ms is not None
    ]
    if clocked:
        per, what = _typical_pace(clocked)
        return (
            per,
            per,
            (
                f"eager prefill host floor {per * 1e3:.1f} us a launch (the host's clock around "
                f"{len(clocked)} eager prefills, host-bound eager times where longer: {what})"
            ),
        )
    host_bound = [(e.eager_ms, e.kernels, e.colls, e.where) for e in found if bound(e)]
    if host_bound:
        per, what = _typical_pace(host_bound)
        return (
            per,
            per,
            (
                f"eager prefill host floor {per * 1e3:.1f} us a launch (host-bound eager runs: "
                f"{what})"
            ),
        )
    tight = min(found, key=lambda e: e.eager_ms / (e.kernels + e.colls))
    per = tight.eager_ms / (tight.kernels + tight.colls)
    return (
        0.0,
        0.0,
        (
            f"eager prefill host floor not seen: every eager prefill GPU-bound, the host at "
            f"most {per * 1e3:.1f} us a launch ({tight.where}); pipeline prefills of small "
            "chunks may be slower than predicted"
        ),
    )


def _per_unit(op: str, ms: float) -> str:
    if op == "decode":
        dense = DECODE_KERNELS[(False, False)]
        return f"{ms * 1e3:.2f} us/kernel ({ms * 1e3 * dense:.1f} us per eager dense layer)"
    return f"{ms:.2f} ms/GB of elementwise traffic"


def _fit_prefill(points: list[_Point]) -> tuple[float, float, float] | None:
    """measured = a x roofline + b x GB of elementwise traffic + c x kernels over rows of
    several sizes and TP degrees, least squares on the relative error (a 2k-token row
    counts as much as a 64k-token one), every term >= 0 (a > 0); the best of the fits
    over the terms' subsets that keep the roofline. None when no fit has a > 0, or when
    the rows have fewer distinct sizes than terms."""
    import numpy as np

    if len({(p.roofline_ms, p.units, p.kernels) for p in points}) < 3:
        return None
    cols = np.array([[p.roofline_ms, p.units, p.kernels] for p in points])
    y = np.array([p.measured_ms for p in points])
    w = 1.0 / y
    best: tuple[float, tuple[float, float, float]] | None = None
    for keep in ((0, 1, 2), (0, 1), (0, 2), (0,)):
        a_ = cols[:, keep] * w[:, None]
        coef, *_ = np.linalg.lstsq(a_, y * w, rcond=None)
        if coef[0] <= 0 or any(c < 0 for c in coef[1:]):
            continue
        full = [0.0, 0.0, 0.0]
        for i, c in zip(keep, coef, strict=True):
            full[i] = float(c)
        resid = float(np.sum((a_ @ coef - y * w) ** 2))
        if best is None or resid < best[0] - 1e-12:
            best = (resid, (full[0], full[1], full[2]))
    return None if best is None else best[1]


def _fit_two_terms(points: list[tuple[float, float, float]]) -> tuple[float, float] | None:
    """Least squares of measured = a x roofline + b x units over (roofline, measured,
    units) points; None unless a > 0 and b >= 0 (then the plain factor is used)."""
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
