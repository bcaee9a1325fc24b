"""What a TP collective costs inside a model's decode step beyond its measured curve,
fitted on the calibration runs that timed a step with its collectives and without.

Why: the advisor times a step's all-reduces on the collective curves ``gpulane sweep``
measured (CUDA-graph replays of one collective after another). Inside a model's step each
all-reduce sits between two kernels that depend on it, and costs more: round 3b's TP=2
calibration runs of qwen3-30b-a3b took 0.19 ms (batch 4) and 0.23 ms (batch 32) more with
their 17 all-reduces than without, where the curves say 0.12 and 0.14 ms. The difference
per collective is what the model adds to each TP collective of a decode step (TP=4's
included: the same latency in each), so that the share of the step that communication
takes, the figure users come for, is the measured one.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpulane.errors import InputError
from gpulane.inference.shapes import ModelShape
from gpulane.inference.sharding import step_comm
from gpulane.planning.comm import Comms
from gpulane.planning.compute import Compute, _f, _row_shape
from gpulane.planning.placement import place
from gpulane.planning.rows import as_rows, extra, ok
from gpulane.record import Row
from gpulane.topology.model import Topology


def _extra_ms(
    row: Row, shape: ModelShape, comms: Comms, topology: Topology, dbytes: int
) -> tuple[float, str] | None:
    """(ms per collective beyond the curve, where) of one TP>1 decode row that carries
    its step with collectives (``time_us``) and without (``extra.compute_only_ms``)."""
    tp = int(_f(row.tp) or 1)
    total, alone, batch = _f(row.time_us), _f(extra(row).get("compute_only_ms")), _f(row.batch)
    row_shape = _row_shape(row, shape)
    if tp < 2 or total is None or alone is None or batch is None or row_shape is None:
        return None
    if len(topology.gpus) < tp:
        return None
    run = row_shape.with_layers(int(_f(row.layers) or row_shape.num_layers))
    placement = place(topology, tp, tp, 1)
    calls = [c for c in step_comm(run, tp, 1, int(batch), int(batch), dbytes) if c.op != "send"]
    count = sum(c.count for c in calls)
    if not count:
        return None
    curve = (
        sum(
            c.count
            * comms.time(c.op, tp, c.size_bytes, placement.tp_label, placement.tp_gbps).time_us
            for c in calls
        )
        / 1e3
    )
    measured = total / 1e3 - alone
    where = f"{row.model} tp={tp} batch {int(batch)}: {measured:.3f} ms vs curves {curve:.3f}"
    return (measured - curve) / count, where


def with_step_collectives(
    compute: Compute,
    shape: ModelShape,
    token_rows: Sequence[Row | Mapping[str, Any]],
    comms: Comms,
    topology: Topology,
    dbytes: int,
) -> Compute:
    """``compute`` with :attr:`Compute.decode_collective_ms` fitted: the median over the
    pp=1, TP>1 decode rows (the model's own where it has some) of their measured
    collective time per collective beyond the curves, never below 0; unchanged where no
    row times its step both ways (the curves alone, as before)."""
    rows = [
        r for r in as_rows(token_rows)
        if r.kind == "tokens" and ok(r) and r.op == "decode" and int(_f(r.pp) or 1) == 1
    ]  # fmt: skip
    own = [r for r in rows if r.model == shape.name]
    found = []
    for r in own or rows:
        try:
            got = _extra_ms(r, shape, comms, topology, dbytes)
        except InputError:  # no curve and no path to project from: says nothing here
            got = None
        if got is not None:
            found.append(got)
    if not found:
        return compute
    per = max(0.0, statistics.median(x for x, _ in found))
    spread = ", ".join(f"{1e3 * x:+.1f} us" for x, _ in found)
    note = (
        f"decode TP collectives +{1e3 * per:.1f} us each beyond their curves (median of "
        f"{len(found)} steps timed with and without them: {spread})"
    )
    return replace(compute, decode_collective_ms=per, source=f"{compute.source}; {note}")
