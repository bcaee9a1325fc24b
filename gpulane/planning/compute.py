"""Compute time of a stage: the roofline of :mod:`gpulane.inference.roofline` at a GPU's
HBM bandwidth and matrix rate, optionally calibrated on measured ``gpulane tokens`` runs
(a factor, and a fixed time per layer when runs at two TP degrees say how much of a step
does not split across GPUs)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpulane.errors import InputError
from gpulane.inference.memory import cache_len
from gpulane.inference.roofline import step_cost
from gpulane.inference.shapes import ModelShape
from gpulane.inference.sharding import check_parallel, stage_layers


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
        """One decode step of ``seqs`` sequences with ``ctx`` cached positions: the bytes
        the stage moves (weights, embedding rows, KV cache, activations) or its FLOPs,
        whichever takes longer."""
        cost = step_cost(shape, "decode", seqs, ctx, dbytes, tp, pp, stage)
        layers = len(stage_layers(shape.num_layers, pp)[stage])
        t = cost.time_s(self.gpu.hbm_gbps, self.gpu.tflops)
        return t * 1e3 * self.decode_scale + layers * self.decode_layer_ms

    def prefill_ms(
        self, shape: ModelShape, tp: int, pp: int, stage: int, seqs: int, input_len: int,
        dbytes: int,
    ) -> float:  # fmt: skip
        """One prefill chunk of ``seqs`` whole sequences: FLOPs of the matmuls and causal
        attention, or the bytes the stage moves, whichever takes longer."""
        cost = step_cost(shape, "prefill", seqs, input_len, dbytes, tp, pp, stage)
        layers = len(stage_layers(shape.num_layers, pp)[stage])
        t = cost.time_s(self.gpu.hbm_gbps, self.gpu.tflops)
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
