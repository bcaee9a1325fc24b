"""Token rows beside the collective rows of the same build, at the sizes the model sends.

A ``tokens`` row (``gpulane tokens``) says, in ``extra.comm_per_step``, how many
all-reduces (and all-gathers) of which size one step makes on a rank: hidden x tokens x
bytes for the all-reduces. The collective rows of the same build (``gpulane sweep``, or
imported nccl-tests output) give the time of that collective at measured sizes over the
same number of ranks; the time at the model's size is interpolated on that curve
(log-log, between the two nearest measured sizes; clamped and flagged outside them).
Each joined row then says how long that collective takes, how much of a step the calls
would take at that speed, and what tokens/s the step reached: which all-reduce cost
which tokens/s.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gpulane.record import Row, frame_rows

JOIN_OPS = ("all_reduce", "all_gather")
# dtypes a model's collectives run in, best first, when the sweep measured several
PREFERRED_DTYPES = ("bfloat16", "half", "float")


@dataclass(frozen=True)
class Curve:
    """Measured time of one collective over sizes (the median per size)."""

    sizes: tuple[int, ...]
    times_us: tuple[float, ...]
    busbw: tuple[float | None, ...]
    dtype: str | None
    run_ids: tuple[str, ...]

    def at(self, size: int) -> tuple[float, float | None, bool]:
        """(time_us, busbw_gbps, extrapolated) at ``size`` bytes."""
        sizes, times = self.sizes, self.times_us
        if size <= sizes[0] or size >= sizes[-1]:
            i = 0 if size <= sizes[0] else len(sizes) - 1
            exact = size == sizes[i]
            return times[i], self.busbw[i] if exact else None, not exact
        j = bisect.bisect_left(sizes, size)
        if sizes[j] == size:
            return times[j], self.busbw[j], False
        lo, hi = j - 1, j
        frac = (math.log(size) - math.log(sizes[lo])) / (math.log(sizes[hi]) - math.log(sizes[lo]))
        t = math.exp(math.log(times[lo]) + frac * (math.log(times[hi]) - math.log(times[lo])))
        return t, None, False


@dataclass
class Joined:
    build: str
    model: str | None
    op: str
    tp: int | None
    pp: int | None
    batch: int | None
    input_len: int | None
    output_len: int | None
    tokens_per_s: float | None
    step_ms: float | None
    comm_share: float | None
    collective: str
    size_bytes: int
    calls_per_step: int
    collective_us: float | None
    busbw_gbps: float | None
    comm_ms_per_step: float | None
    comm_share_est: float | None
    extrapolated: bool
    curve_dtype: str | None
    curve_runs: str | None
    note: str | None = None
    # why an estimated share over 100 % cannot be the step's (None: at most 100 %)
    over_step: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def known(value: Any) -> Any:
    """A row's field with a frame's missing values (NaN, pandas NA) as None: rows read
    from a frame (:func:`gpulane.record.frame_rows`) keep the frame's values as they are."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if value.__class__.__name__ in ("NAType", "NaTType"):
        return None
    return value


def _int(value: Any) -> int | None:
    value = known(value)
    return None if value is None else int(value)


def _extra(row: Row) -> dict[str, Any]:
    extra = row.extra
    if isinstance(extra, str):
        import json

        try:
            extra = json.loads(extra)
        except ValueError:
            return {}
    return extra if isinstance(extra, dict) else {}


def _ok(row: Row, kind: str) -> bool:
    return known(row.kind) == kind and (known(row.status) or "ok") == "ok"


def build_curves(
    rows: Iterable[Row], ops: Sequence[str] = JOIN_OPS
) -> dict[tuple[str, str, int], Curve]:
    """(build, collective, world_size) -> curve, from ok collective rows of ``ops`` with
    times."""
    points: dict[
        tuple[str, str, int], dict[str | None, dict[int, list[tuple[float, Any, str]]]]
    ] = {}
    for r in rows:
        if not _ok(r, "collective"):
            continue
        op, size, t, n = known(r.op), known(r.size_bytes), known(r.time_us), known(r.world_size)
        if op not in ops or size is None or t is None or n is None or float(t) <= 0:
            continue
        if int(size) <= 0:
            continue
        key = (str(known(r.build)), str(op), int(n))
        by_dtype = points.setdefault(key, {})
        by_dtype.setdefault(known(r.dtype), {}).setdefault(int(size), []).append(
            (float(t), known(r.busbw_gbps), str(known(r.run_id)))
        )
    curves = {}
    for key, by_dtype in points.items():
        dtype = next((d for d in PREFERRED_DTYPES if d in by_dtype), None)
        if dtype is None:  # the dtype with the most sizes
            dtype = max(by_dtype, key=lambda d: len(by_dtype[d]))
        pts = by_dtype[dtype]
        sizes = tuple(sorted(pts))
        times: list[float] = []
        bws: list[float | None] = []
        runs: set[str] = set()
        for s in sizes:
            vals = sorted(pts[s], key=lambda p: p[0])
            mid = vals[len(vals) // 2]
            times.append(mid[0])
            bws.append(float(mid[1]) if mid[1] is not None else None)
            runs.update(p[2] for p in vals)
        curves[key] = Curve(sizes, tuple(times), tuple(bws), dtype, tuple(sorted(runs)))
    return curves


def join_rows(rows: Sequence[Row], builds: Sequence[str] = ()) -> list[Joined]:
    """Every tokens row's collectives, timed on its build's measured curve."""
    curves = build_curves(rows)
    out: list[Joined] = []
    for r in rows:
        if not _ok(r, "tokens"):
            continue
        build = str(known(r.build))
        if builds and build not in builds:
            continue
        extra = _extra(r)
        tp = _int(r.tp)
        step_us = known(r.time_us)
        step_ms = float(step_us) / 1e3 if step_us is not None else None
        for call in extra.get("comm_per_step") or []:
            op = call.get("op")
            if op not in JOIN_OPS:
                continue
            size, count = int(call["size_bytes"]), int(call["count"])
            curve = curves.get((build, op, tp or 0))
            t = bw = comm_ms = share = None
            extrapolated, note = False, None
            if curve is None:
                note = _why_no_curve(curves, build, op, tp or 0)
            else:
                t, bw, extrapolated = curve.at(size)
                if bw is None:
                    bw = _busbw(op, size, t, tp or 1)
                comm_ms = count * t / 1e3
                if step_ms:
                    share = comm_ms / step_ms
                if extrapolated:
                    note = (
                        f"{size} B outside the measured {curve.sizes[0]}..{curve.sizes[-1]} B; "
                        "nearest size used"
                    )
            out.append(
                Joined(
                    build=build,
                    model=known(r.model),
                    op=str(known(r.op)),
                    tp=tp,
                    pp=_int(r.pp),
                    batch=_int(r.batch),
                    input_len=_int(r.input_len),
                    output_len=_int(r.output_len),
                    tokens_per_s=known(r.tokens_per_s),
                    step_ms=step_ms,
                    comm_share=known(r.comm_share),
                    collective=op,
                    size_bytes=size,
                    calls_per_step=count,
                    collective_us=t,
                    busbw_gbps=bw,
                    comm_ms_per_step=comm_ms,
                    comm_share_est=share,
                    extrapolated=extrapolated,
                    curve_dtype=curve.dtype if curve else None,
                    curve_runs=",".join(curve.run_ids) if curve else None,
                    note=note,
                    over_step=over_step(comm_ms, step_ms, extrapolated, known(r.comm_share)),
                )
            )
    return out


def over_step(
    comm_ms: float | None, step_ms: float | None, extrapolated: bool, measured: Any
) -> str | None:
    """Why an estimate of a step's collectives longer than the step itself is off, in
    words (None when it is not longer). The collectives run inside the step, so the
    standalone curve overstates them: timed as separate eager calls with their launch
    cost (a step replays them in a CUDA graph), on another backend or other ranks, past
    its measured sizes, or overlapped with compute in the step."""
    if comm_ms is None or not step_ms or comm_ms <= step_ms:
        return None
    why = [
        f"comm time {comm_ms:.3g} ms exceeds the {step_ms:.3g} ms step "
        f"({100 * comm_ms / step_ms:.0f}%): the estimate is off, the collectives inside "
        "the step took less than the standalone curve says"
    ]
    if extrapolated:
        why.append("the step's sizes lie outside the measured range")
    why.append(
        "the curve times separate calls (eager launches, another backend or ranks) where "
        "the step replays them in a graph or overlaps them with compute"
    )
    if measured is not None:
        why.append(f"the step's own measured share is {100 * float(measured):.0f}%")
    return "; ".join(why)


def _why_no_curve(curves: dict[tuple[str, str, int], Curve], build: str, op: str, n: int) -> str:
    """Why a tokens row found no curve: which builds and rank counts the rows do have."""
    others = sorted((b, m) for b, o, m in curves if o == op)
    head = f"no {op} rows of build {build} over {n} ranks"
    if not others:
        return f"{head}, and no {op} rows of any build"
    have = ", ".join(f"build {b} over {m} ranks" for b, m in others)
    same_ranks = [b for b, m in others if m == n]
    hint = (
        f"; label both runs with the same build=LABEL to join them (build {same_ranks[0]} has "
        f"{op} over {n} ranks)"
        if same_ranks
        else f"; measure {op} over {n} ranks on build {build}"
    )
    return f"{head} (the rows have {have}){hint}"


def _busbw(op: str, size: int, t_us: float, n: int) -> float:
    factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
    return size / (t_us * 1e3) * factor


def join_frame(frame: Any, builds: Sequence[str] = ()) -> Any:
    """The join as a pandas DataFrame (the analysis API)."""
    import pandas as pd

    rows = frame_rows(frame) if hasattr(frame, "columns") else list(frame)
    return pd.DataFrame([j.to_dict() for j in join_rows(rows, builds)])
