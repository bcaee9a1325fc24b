"""`gpulane advise`: TP vs PP for a model on a build, from its measured collective curves.

Reads the settings, gathers the inputs (:mod:`gpulane.planning.inputs`), runs the advice
(:mod:`gpulane.planning.advice`) for every split of the GPUs at every batch, and prints
the predictions, the model itself, the rule of thumb beside it, and a recommendation for
latency and one for throughput with the reasons.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpulane.config.commands import AdviseConfig
from gpulane.errors import InputError, print_warning
from gpulane.inference.batching import as_list
from gpulane.inference.shapes import ModelShape, shape_from_config
from gpulane.planning import calibration, inputs
from gpulane.planning.advice import advise
from gpulane.planning.comm import Comms, MeasuredComm, Projection
from gpulane.planning.compute import gpu_spec
from gpulane.planning.placement import apply_what_if, synthetic_topology
from gpulane.planning.predict import Workload, splits
from gpulane.planning.provenance import provenance
from gpulane.planning.report import json_doc, print_tables
from gpulane.planning.uncertainty import expected_errors
from gpulane.record import Row
from gpulane.session.world import local_gpus
from gpulane.topology.model import Topology

MEASURED_BUILD = "advise-measured"  # build label of the rows measure=true makes


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass
class _Inputs:
    """What one advise run reads: its settings, rows, topology and GPU count."""

    shape: ModelShape
    dbytes: int
    batches: list[int]
    fmt: str
    build: str | None
    what_if: str | None
    p2p: bool
    rows: list[Row]
    paths: list[Path]
    topo: Topology | None
    topo_source: str
    probed: bool
    gpus: int = 0


def _p2p(cfg: AdviseConfig, what_if: str | None) -> bool:
    value = str(cfg.p2p).strip().lower()
    if value not in ("on", "off", "true", "false"):
        raise InputError(f"p2p: expected on or off, got {cfg.p2p!r}")
    on = value in ("on", "true")
    if not on and not (what_if or "").lower().startswith("pcie:"):
        # measured rows ran with the P2P state of their box: only a projection can change it
        raise InputError(
            "p2p=off: only with what_if=pcie:GENxWIDTH (a projection); measured rows carry "
            "the P2P state they ran with (measure P2P off with gpulane sweep preset=pcie-host)"
        )
    return on


def _batches(cfg: AdviseConfig) -> list[int]:
    """batch=, or concurrency= when given: a serving engine's N requests in flight are the
    N sequences of its decode step."""
    if cfg.concurrency in (None, "", []):
        return as_list(cfg.batch, "batch")
    return as_list(cfg.concurrency, "concurrency")


def _read_inputs(cfg: AdviseConfig) -> _Inputs:
    fmt = str(cfg.format)
    if fmt not in ("table", "json"):
        raise InputError(f"format: expected table or json, got {cfg.format!r}")
    what_if = None if cfg.what_if in (None, "") else str(cfg.what_if)
    build = None if cfg.build is None else str(cfg.build)
    targets = inputs.paths_of(cfg.run)
    if not targets and build is not None and not cfg.measure:
        targets = [build]
    results_dir = str(cfg.results_dir)
    rows, paths = inputs.load_rows(targets, build, results_dir) if targets else ([], [])
    topo_spec = str(cfg.topology or "none")
    topo, topo_source = inputs.load_topology(topo_spec, paths)
    # measure=true measures this machine: its topology is one probe away (gpulane topo
    # --json), so placement names real paths rather than "unknown"
    probed = False
    if topo is None and cfg.measure and topo_spec == "auto":
        topo, topo_source = inputs.probe_live()
        probed = topo is not None
    got = _Inputs(
        shape_from_config(dict(cfg.model)), inputs.advise_dtype_bytes(str(cfg.dtype)),
        _batches(cfg), fmt, build, what_if, _p2p(cfg, what_if), rows, paths, topo,
        topo_source, probed,
    )  # fmt: skip
    got.gpus = _gpu_count(cfg, topo)
    return got


def _gpu_count(cfg: AdviseConfig, topo: Topology | None) -> int:
    gpus = cfg.gpus
    if str(gpus) == "auto":
        if topo is not None and topo.gpus:
            gpus = len(topo.gpus)
        else:
            gpus = local_gpus()
            if not gpus:
                raise InputError("gpus: no topology and no local GPU to count; give gpus=N")
    try:
        n = int(gpus)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise InputError(f"gpus: expected a whole number >= 1, got {cfg.gpus!r}")
    return n


def _measure_if_asked(cfg: AdviseConfig, got: _Inputs) -> None:
    """Collective rows measured now (measure=true) when none were given; else the refusal
    that names how to give some (one GPU needs none)."""
    if got.rows or got.what_if:
        return
    if cfg.measure:
        results_dir = str(cfg.results_dir)
        label = got.build or MEASURED_BUILD
        ranks = [tp for tp, _pp, _ in splits(got.shape, got.gpus) if tp > 1]
        made = inputs.measure_now(ranks, label, results_dir)
        got.rows, got.paths = inputs.load_rows(made, label, results_dir) if made else ([], [])
        if got.probed and got.topo is not None:
            written = inputs.write_beside(got.topo, made)
            if written:
                got.topo_source += f"; written beside the measured rows: {written[0]}"
    elif got.gpus > 1:
        raise InputError(
            "advise: no collective rows; give run=DIR (gpulane sweep or nccl-tests output), "
            "build=LABEL (rows under results_dir), measure=true (measure now), or "
            "what_if=pcie:3x4 with topology=FILE (a projection)"
        )


def _projection(cfg: AdviseConfig, p2p: bool) -> Projection:
    proj = cfg.projection or {}
    extra = 0.0 if p2p else float(proj.get("host_staged_extra_latency_us") or 0.0)
    return Projection(
        dict(proj.get("efficiency") or {}), dict(proj.get("latency_us") or {}),
        host_staged_extra_us=extra, p2p=p2p,
    )  # fmt: skip


def run(cfg: AdviseConfig) -> int:
    got = _read_inputs(cfg)
    errors = expected_errors(cfg.expected_error)
    _measure_if_asked(cfg, got)
    coll_rows = [r for r in got.rows if r.kind == "collective"]
    measured = MeasuredComm(coll_rows, got.build) if coll_rows else None
    given = None if str(cfg.gpu) == "auto" else str(cfg.gpu)
    prov = provenance(
        got.rows, measured.build if measured else got.build, inputs.gpu_model(got.topo),
        got.topo_source, given,
    )  # fmt: skip
    for warning in prov.warnings:
        print_warning(warning)
    spec = gpu_spec(
        dict(cfg.gpu_specs), prov.gpu_model, _opt_float(cfg.hbm_gbps), _opt_float(cfg.tflops),
        _opt_float(cfg.memory_gib),
    )  # fmt: skip
    rows, calibration_text = got.rows, None
    if cfg.calibrate:
        rows, calibration_text = _calibration(
            cfg, got.shape, rows, got.gpus, spec.memory_gib, got.build
        )
    topo, what_if_text = got.topo, None
    if got.what_if:
        base = topo if topo is not None else synthetic_topology(got.gpus, spec.name)
        topo, what_if_text = apply_what_if(base, got.what_if)
        if not got.p2p:
            what_if_text += ", P2P off: collectives staged through host memory"
    comms = Comms(measured, _projection(cfg, got.p2p), projected_only=got.what_if is not None)
    build_label = what_if_text or (measured.build if measured else None) or "unmeasured build"
    advice = advise(
        got.shape, got.gpus, topo if topo is not None else synthetic_topology(got.gpus, spec.name),
        comms, spec, _workloads(cfg, got), build_label, rows if cfg.calibrate else [], errors,
    )  # fmt: skip
    info = {
        "model": got.shape.name, "gpus": got.gpus, "gpu": asdict(spec), "build": build_label,
        "projection": what_if_text is not None, "what_if": got.what_if, "p2p": got.p2p,
        "concurrency": cfg.concurrency not in (None, "", []), "topology": got.topo_source,
        "compute": advice.computes, "collectives": advice.collectives, "rows": len(rows),
        "inputs": prov.to_dict(), "calibration": calibration_text,
    }  # fmt: skip
    if got.fmt == "json":
        sys.stdout.write(json.dumps(json_doc(info, advice), indent=2, default=str) + "\n")
        return 0
    print_tables(info, advice, prov.lines)
    return 0


def _workloads(cfg: AdviseConfig, got: _Inputs) -> list[Workload]:
    micro = None if str(cfg.micro_batches) == "auto" else int(cfg.micro_batches)
    chunk, fraction = int(cfg.prefill_chunk_tokens), float(cfg.memory_fraction)
    return [
        Workload(batch, input_len, output_len, got.dbytes, micro, chunk, fraction)
        for input_len in as_list(cfg.input_len, "input_len")
        for output_len in as_list(cfg.output_len, "output_len")
        for batch in got.batches
    ]


def _calibration(
    cfg: AdviseConfig,
    shape: ModelShape,
    rows: list[Row],
    gpus: int,
    memory_gib: float,
    build: str | None,
) -> tuple[list[Row], str | None]:
    """Rows with a short run of the model itself added (measure=true) when none of its
    tokens rows are there; and what was done, or which run would calibrate it, in words."""
    tokens = [r for r in rows if r.kind == "tokens"]
    if any(r.model == shape.name for r in tokens):
        return rows, None
    batches = as_list(cfg.batch, "batch")
    input_lens = as_list(cfg.input_len, "input_len")
    # the short runs are labelled with the build whose collectives the advice reads
    measured = sorted({str(r.build) for r in rows if r.kind == "collective"})
    label = build or (measured[0] if len(measured) == 1 else MEASURED_BUILD)
    dbytes = inputs.advise_dtype_bytes(str(cfg.dtype))
    p = calibration.plan(
        shape, dict(cfg.model), gpus, memory_gib, batches, input_lens, dbytes, label,
        float(cfg.memory_fraction),
    )  # fmt: skip
    others = sorted({str(r.model) for r in tokens})
    have = (
        f"carried over from the rows of {', '.join(others)} (by kernel and elementwise counts)"
        if others
        else "the plain roofline"
    )
    if p is None:
        return rows, (
            f"no gpulane tokens rows of {shape.name}, and no short run of it fits one GPU: "
            f"compute from {have}"
        )
    if cfg.measure:
        made, took = calibration.run_now(p, str(cfg.results_dir))
        more, _ = inputs.load_rows(made, label, str(cfg.results_dir)) if made else ([], [])
        return rows + [r for r in more if r.kind == "tokens"], (
            f"calibrated on a short run made now: {p.describe(shape)} ({took:.0f} s)"
        )
    return rows, "\n  ".join(
        [
            f"no gpulane tokens rows of {shape.name}: compute from {have}. To calibrate on "
            f"{p.describe(shape)} (seconds to a minute each):",
            *p.commands(),
            "then give their run directories with run=, or add measure=true",
        ]
    )
