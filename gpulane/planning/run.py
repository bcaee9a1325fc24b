"""`gpulane advise`: TP vs PP for a model on a build, from its measured collective curves.

Reads the settings, gathers the inputs (:mod:`gpulane.planning.inputs`), runs the advice
(:mod:`gpulane.planning.advice`) for every split of the GPUs at every batch, and prints
the predictions, the model itself, the rule of thumb beside it, and a recommendation for
latency and one for throughput with the reasons.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from gpulane.config.commands import AdviseConfig
from gpulane.errors import InputError, print_warning
from gpulane.inference.batching import as_list
from gpulane.inference.shapes import ModelShape, shape_from_config
from gpulane.planning import calibration, inputs
from gpulane.planning.advice import Advice, advise
from gpulane.planning.comm import Comms, MeasuredComm, Projection
from gpulane.planning.compute import gpu_spec
from gpulane.planning.placement import apply_what_if, synthetic_topology
from gpulane.planning.predict import MODEL_TEXT, RULE_OF_THUMB, Workload, split_name, splits
from gpulane.planning.provenance import provenance
from gpulane.session.world import local_gpus

MEASURED_BUILD = "advise-measured"  # build label of the rows measure=true makes


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def run(cfg: AdviseConfig) -> int:
    shape = shape_from_config(dict(cfg.model))
    dbytes = inputs.advise_dtype_bytes(str(cfg.dtype))
    batches = as_list(cfg.batch, "batch")
    input_lens = as_list(cfg.input_len, "input_len")
    output_lens = as_list(cfg.output_len, "output_len")
    fmt = str(cfg.format)
    if fmt not in ("table", "json"):
        raise InputError(f"format: expected table or json, got {cfg.format!r}")
    build = None if cfg.build is None else str(cfg.build)
    targets = inputs.paths_of(cfg.run)
    what_if = None if cfg.what_if in (None, "") else str(cfg.what_if)
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

    gpus = cfg.gpus
    if str(gpus) == "auto":
        if topo is not None and topo.gpus:
            gpus = len(topo.gpus)
        else:
            gpus = local_gpus()
            if not gpus:
                raise InputError("gpus: no topology and no local GPU to count; give gpus=N")
    gpus = int(gpus)
    if gpus < 1:
        raise InputError(f"gpus: expected a whole number >= 1, got {cfg.gpus!r}")

    if not rows and not what_if:
        if cfg.measure:
            label = build or MEASURED_BUILD
            ranks = [tp for tp, _pp, _ in splits(shape, gpus) if tp > 1]
            made = inputs.measure_now(ranks, label, results_dir)
            rows, paths = inputs.load_rows(made, label, results_dir) if made else ([], [])
            if probed and topo is not None:
                written = inputs.write_beside(topo, made)
                if written:
                    topo_source += f"; written beside the measured rows: {written[0]}"
        elif gpus > 1:
            raise InputError(
                "advise: no collective rows; give run=DIR (gpulane sweep or nccl-tests output), "
                "build=LABEL (rows under results_dir), measure=true (measure now), or "
                "what_if=pcie:3x4 with topology=FILE (a projection)"
            )

    coll_rows = [r for r in rows if r.get("kind") == "collective"]
    measured = MeasuredComm(coll_rows, build) if coll_rows else None
    given = None if str(cfg.gpu) == "auto" else str(cfg.gpu)
    prov = provenance(
        rows, measured.build if measured else build, inputs.gpu_model(topo), topo_source, given
    )
    for warning in prov.warnings:
        print_warning(warning)
    spec = gpu_spec(
        dict(cfg.gpu_specs),
        prov.gpu_model,
        _opt_float(cfg.hbm_gbps),
        _opt_float(cfg.tflops),
        _opt_float(cfg.memory_gib),
    )
    calibration_text = None
    if cfg.calibrate:
        rows, calibration_text = _calibration(cfg, shape, rows, gpus, spec.memory_gib, build)
    what_if_text = None
    if what_if:
        base = topo if topo is not None else synthetic_topology(gpus, spec.name)
        topo, what_if_text = apply_what_if(base, what_if)

    proj = cfg.projection or {}
    comms = Comms(
        measured,
        Projection(dict(proj.get("efficiency") or {}), dict(proj.get("latency_us") or {})),
        projected_only=what_if is not None,
    )
    build_label = what_if_text or (measured.build if measured else None) or "unmeasured build"
    micro = None if str(cfg.micro_batches) == "auto" else int(cfg.micro_batches)
    chunk, fraction = int(cfg.prefill_chunk_tokens), float(cfg.memory_fraction)
    workloads = [
        Workload(batch, input_len, output_len, dbytes, micro, chunk, fraction)
        for input_len in input_lens
        for output_len in output_lens
        for batch in batches
    ]
    topology = topo if topo is not None else synthetic_topology(gpus, spec.name)
    advice = advise(
        shape, gpus, topology, comms, spec, workloads, build_label,
        rows if cfg.calibrate else [],
    )  # fmt: skip

    info = {
        "model": shape.name,
        "gpus": gpus,
        "gpu": asdict(spec),
        "build": build_label,
        "projection": what_if_text is not None,
        "what_if": what_if,
        "topology": topo_source,
        "compute": advice.computes,
        "collectives": advice.collectives,
        "rows": len(rows),
        "inputs": prov.to_dict(),
        "calibration": calibration_text,
    }
    if fmt == "json":
        doc = {
            **info,
            "model_text": MODEL_TEXT,
            "refused": [{"tp": t, "pp": p, "why": w} for t, p, w in advice.refused],
            "predictions": [p.to_dict() for p in advice.predictions],
            "recommendations": [
                {"input_len": i, "output_len": o, **r.to_dict()}
                for i, o, r in advice.recommendations
            ],
        }
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return 0
    print_tables(info, advice, prov.lines)
    return 0


def _calibration(
    cfg: AdviseConfig,
    shape: ModelShape,
    rows: list[dict[str, Any]],
    gpus: int,
    memory_gib: float,
    build: str | None,
) -> tuple[list[dict[str, Any]], str | None]:
    """Rows with a short run of the model itself added (measure=true) when none of its
    tokens rows are there; and what was done, or which run would calibrate it, in words."""
    tokens = [r for r in rows if r.get("kind") == "tokens"]
    if any(r.get("model") == shape.name for r in tokens):
        return rows, None
    batches = as_list(cfg.batch, "batch")
    input_lens = as_list(cfg.input_len, "input_len")
    # the short runs are labelled with the build whose collectives the advice reads
    measured = sorted({str(r.get("build")) for r in rows if r.get("kind") == "collective"})
    label = build or (measured[0] if len(measured) == 1 else MEASURED_BUILD)
    dbytes = inputs.advise_dtype_bytes(str(cfg.dtype))
    p = calibration.plan(
        shape, dict(cfg.model), gpus, memory_gib, batches, input_lens, dbytes, label,
        float(cfg.memory_fraction),
    )  # fmt: skip
    others = sorted({str(r.get("model")) for r in tokens})
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
        return rows + [r for r in more if r.get("kind") == "tokens"], (
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


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def print_tables(info: dict[str, Any], advice: Advice, lines: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    from gpulane.inference.memory import GiB

    preds = advice.predictions
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    gpu = info["gpu"]
    head = "PROJECTION (not measured): " if info["projection"] else ""
    console.print(
        f"# gpulane advise: {head}{info['model']} on {info['gpus']} x {gpu['name']}, "
        f"build {info['build']}"
    )
    console.print(f"# topology: {info['topology']}")
    for line in lines:
        console.print(line, soft_wrap=True)  # one line each, paths whole
    if info.get("calibration"):
        for i, line in enumerate(str(info["calibration"]).split("\n")):
            console.print(f"# {'calibration: ' if i == 0 else ''}{line}", markup=False)
    for c in info["compute"]:
        console.print(
            f"# compute: {c} (HBM {gpu['hbm_gbps']:.0f} GB/s, {gpu['tflops']:.0f} TFLOP/s, "
            f"{gpu['memory_gib']:.1f} GiB; {gpu['source']})"
        )
    for k, v in info["collectives"].items():
        console.print(f"# {k} ranks: {v}")
    keys = sorted({(p.input_len, p.output_len, p.batch) for p in preds})
    for input_len, output_len, batch in keys:
        t = Table(
            title=f"{head}batch {batch}, input {input_len}, output {output_len}",
            show_lines=False,
        )
        for name in ("split", "GPUs (TP groups)", "mem GiB/GPU", "TTFT ms", "prefill tok/s",
                     "decode tok/s", "ITL ms", "all-reduce % dec/pre", "bubble % dec",
                     "rule of thumb (decode)"):  # fmt: skip
            t.add_column(name, justify="left" if name[0] in "sGr" else "right")
        for p in preds:
            if (p.input_len, p.output_len, p.batch) != (input_len, output_len, batch):
                continue
            mem = f"{p.memory.total / GiB:.1f}"
            if not p.fits or p.decode is None or p.prefill is None:
                t.add_row(p.name, p.placement.describe(), mem + " (no fit)", *["-"] * 7)
                continue
            path = f" [{p.placement.tp_label}]" if p.placement.tp_label and p.tp > 1 else ""
            t.add_row(
                p.name,
                p.placement.describe() + path,
                mem,
                f"{p.prefill.time_ms:.1f}",
                f"{p.prefill.tokens_per_s:.0f}",
                f"{p.decode.tokens_per_s:.1f}",
                f"{p.decode.time_ms:.2f}",
                f"{_pct(p.decode.allreduce_share)}/{_pct(p.prefill.allreduce_share)}",
                _pct(p.decode.bubble_share),
                p.rule_decode.text() if p.rule_decode else "-",
            )
        console.print(t)
    for tp, pp, why in advice.refused:
        console.print(f"# {split_name(tp, pp)} not possible: {why}")
    console.print(MODEL_TEXT)
    console.print(
        f"rule of thumb (seed document, shown beside the prediction, not used for it): "
        f"bandwidth the TP all-reduces need to keep up with compute above "
        f"{100 * RULE_OF_THUMB:.0f}% of the link: expect trouble"
    )
    for input_len, output_len, r in advice.recommendations:
        console.print(f"\nrecommended for {r.goal} (input {input_len}, output {output_len}):")
        for line in r.reasons:
            console.print(f"  - {line}")
