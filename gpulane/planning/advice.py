"""The whole advice: every TP x PP split of the GPUs that the shapes allow, predicted at
every workload (calibrated per workload when token rows are given), and the splits
recommended for latency and for throughput per (input, output) length."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpulane.inference.shapes import ModelShape
from gpulane.planning.comm import Comms
from gpulane.planning.compute import Compute, GpuSpec, calibrate
from gpulane.planning.placement import place
from gpulane.planning.predict import Prediction, Workload, predict, splits
from gpulane.planning.recommend import Recommendation, recommend
from gpulane.planning.rows import as_rows
from gpulane.planning.step_collectives import with_step_collectives
from gpulane.planning.uncertainty import ExpectedError, basis_of
from gpulane.record import Row
from gpulane.topology.model import Topology


def _collectives_basis(p: Prediction) -> str:
    """measured, projected (any collective of the split from the projection), or none."""
    calls = [c for phase in (p.decode, p.prefill) if phase for c in phase.calls]
    if not calls:
        return "none"
    if any(str(c.get("source", "")).startswith("projected") for c in calls):
        return "projected"
    return "measured"


@dataclass
class Advice:
    predictions: list[Prediction] = field(default_factory=list)
    refused: list[tuple[int, int, str]] = field(default_factory=list)  # (tp, pp, why)
    collectives: dict[str, str] = field(default_factory=dict)  # "op over n" -> source
    computes: list[str] = field(default_factory=list)  # compute models used, in words
    # (input_len, output_len, recommendation)
    recommendations: list[tuple[int, int, Recommendation]] = field(default_factory=list)


def advise(
    shape: ModelShape,
    gpus: int,
    topology: Topology,
    comms: Comms,
    spec: GpuSpec,
    workloads: Sequence[Workload],
    build: str,
    token_rows: Sequence[Row | Mapping[str, Any]] = (),
    errors: Mapping[str, ExpectedError] | None = None,
) -> Advice:
    """Predictions of every split at every workload, and the recommendations. Compute is
    calibrated on ``token_rows`` (``gpulane tokens`` rows of this model) when given."""
    out = Advice()
    token_rows = as_rows(token_rows)  # once, not once per workload
    for wl in workloads:
        compute = Compute(spec)
        if token_rows:
            compute = calibrate(compute, shape, token_rows, wl.batch, wl.input_len, wl.dtype_bytes)
            compute = with_step_collectives(
                compute, shape, token_rows, comms, topology, wl.dtype_bytes
            )
        if compute.source not in out.computes:
            out.computes.append(compute.source)
        for tp, pp, why in splits(shape, gpus):
            if why is not None:
                if (tp, pp, why) not in out.refused:
                    out.refused.append((tp, pp, why))
                continue
            placement = place(topology, gpus, tp, pp)
            p = predict(shape, tp, pp, wl, comms, compute, placement, spec.memory_gib)
            p.basis = basis_of(compute, _collectives_basis(p), errors or {}, shape.name, gpus)
            out.predictions.append(p)
            for phase in (p.decode, p.prefill):
                for c in phase.calls if phase else []:
                    ranks = tp if c["op"] != "send" else 2
                    out.collectives.setdefault(f"{c['op']} over {ranks}", c["source"])
    lengths = list(dict.fromkeys((wl.input_len, wl.output_len) for wl in workloads))
    batches = list(dict.fromkeys(wl.batch for wl in workloads))
    for input_len, output_len in lengths:
        group = [
            p for p in out.predictions if (p.input_len, p.output_len) == (input_len, output_len)
        ]
        out.recommendations += [
            (input_len, output_len, r) for r in recommend(group, batches, build)
        ]
    return out
