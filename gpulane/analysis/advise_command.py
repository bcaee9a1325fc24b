"""`gpulane advise`: TP vs PP for a model on a build, from its measured collective curves.

Gathers the inputs (collective and token rows, topology, GPU rates), runs the model of
:mod:`gpulane.analysis.advise` for every split of the GPUs at every batch, and prints the
predictions, the model itself, the rule of thumb beside it, and a recommendation for
latency and one for throughput with the reasons.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gpulane.analysis import advise as A
from gpulane.errors import InputError, RunFailed
from gpulane.inference.runner import as_list
from gpulane.inference.shapes import dtype_bytes, shape_from_config
from gpulane.topology.model import Topology

LIST_KEYS = frozenset({"batch", "input_len", "output_len", "run"})
ROWS_SUFFIXES = (".jsonl", ".parquet")


def main(argv: list[str]) -> int:
    from gpulane.hydra_app import comma_lists, run_hydra

    return run_hydra("advise", advise, comma_lists(argv, LIST_KEYS), "gpulane advise")


# -- inputs ------------------------------------------------------------------------------


def _paths(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [p for p in value.split(",") if p]
    return [str(p) for p in value]


def load_rows(
    targets: Sequence[str], build: str | None, results_dir: str
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Rows of run directories, rows files, nccl-tests logs, run ids or build labels; and
    the paths they came from (to look for a topology.json beside them)."""
    from gpulane.analysis.store import load_frame, records, resolve_targets

    rows: list[dict[str, Any]] = []
    paths: list[Path] = []
    for target in targets:
        p = Path(target)
        if p.is_file() and not p.name.endswith(ROWS_SUFFIXES):
            from gpulane.collectives.nccl_tests.logs import rows_from_file

            label = build or p.stem
            rows += [r.to_dict() for r in rows_from_file(p, build=label)]
            paths.append(p)
        elif p.exists():
            rows += records(load_frame([p]))
            paths.append(p)
        else:
            for _label, frame in resolve_targets([target], results_dir):
                rows += records(frame)
                paths += [Path(d) for d in sorted(set(frame["run_dir"].dropna()))]
    return rows, paths


def measure_now(gpus_needed: Sequence[int], cfg: DictConfig) -> list[str]:
    """Run `gpulane sweep` for the collectives the splits need; their run directories."""
    label = str(cfg.build or "advise-measured")
    root = Path(str(cfg.results_dir))
    done = []
    for n in sorted(set(gpus_needed)):
        ops = "[all_reduce,all_gather,sendrecv]" if n == 2 else "[all_reduce,all_gather]"
        for graph, top in (("true", "64M"), ("false", "1G")):
            cmd = [
                sys.executable, "-m", "gpulane.cli", "sweep", f"collectives={ops}",
                "dtype=bfloat16", "in_place=true", f"graph={graph}", "sizes.min=8",
                f"sizes.max={top}", f"ranks={n}", "device=cuda", f"build={label}",
                f"results_dir={root}", "progress=false",
            ]  # fmt: skip
            print("# measuring: " + " ".join(cmd[3:]), flush=True)
            status = subprocess.call(cmd)
            if status:
                raise RunFailed(f"advise: measuring the collectives failed ({' '.join(cmd[3:])})")
        done.append(label)
    return [str(root)]


def load_topology(cfg: DictConfig, paths: Sequence[Path]) -> tuple[Topology | None, str]:
    spec = str(cfg.topology or "none")
    if spec == "none":
        return None, "none"
    if spec == "live":
        from gpulane.topology.live import probe_topology

        return probe_topology(), "live probe"
    from gpulane.analysis.store import find_topology
    from gpulane.analysis.store import load_topology as read

    if spec == "auto":
        found = find_topology(paths)
        if found is None:
            return None, "none found beside the rows"
        return A.topology_from_json(read(found)), str(found)
    return A.topology_from_json(read(spec)), spec


def _gpu_model(topo: Topology | None, rows: Sequence[dict[str, Any]]) -> str | None:
    if topo is not None:
        for g in topo.gpus:
            if g.model:
                return g.model
    for r in rows:
        versions = r.get("versions")
        if isinstance(versions, dict) and versions.get("gpu"):
            return str(versions["gpu"])
    return None


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


# -- the command ---------------------------------------------------------------------------


def advise(cfg: DictConfig) -> int:
    shape = shape_from_config(dict(cfg.model))
    dbytes = dtype_bytes(str(cfg.dtype))
    batches = as_list(cfg.batch, "batch")
    input_lens = as_list(cfg.input_len, "input_len")
    output_lens = as_list(cfg.output_len, "output_len")
    fmt = str(cfg.format)
    if fmt not in ("table", "json"):
        raise InputError(f"format: expected table or json, got {cfg.format!r}")
    build = None if cfg.build is None else str(cfg.build)
    targets = _paths(cfg.run)
    what_if = None if cfg.what_if in (None, "") else str(cfg.what_if)
    if not targets and build is not None and not cfg.measure:
        targets = [build]
    rows, paths = load_rows(targets, build, str(cfg.results_dir)) if targets else ([], [])
    topo, topo_source = load_topology(cfg, paths)

    gpus = cfg.gpus
    if str(gpus) == "auto":
        if topo is not None and topo.gpus:
            gpus = len(topo.gpus)
        else:
            from gpulane.collectives.command import local_gpus

            gpus = local_gpus()
            if not gpus:
                raise InputError("gpus: no topology and no local GPU to count; give gpus=N")
    gpus = int(gpus)
    if gpus < 1:
        raise InputError(f"gpus: expected a whole number >= 1, got {cfg.gpus!r}")

    if not rows and not what_if:
        if cfg.measure:
            targets = measure_now([tp for tp, _pp, _ in A.splits(shape, gpus) if tp > 1], cfg)
            rows, paths = load_rows(targets, build or "advise-measured", str(cfg.results_dir))
        elif gpus > 1:
            raise InputError(
                "advise: no collective rows; give run=DIR (gpulane sweep or nccl-tests output), "
                "build=LABEL (rows under results_dir), measure=true (measure now), or "
                "what_if=pcie:3x4 with topology=FILE (a projection)"
            )

    model_name = cfg.gpu if str(cfg.gpu) != "auto" else _gpu_model(topo, rows)
    spec = A.gpu_spec(
        OmegaConf.to_container(cfg.gpu_specs, resolve=True),  # type: ignore[arg-type]
        None if model_name is None else str(model_name),
        _opt_float(cfg.hbm_gbps),
        _opt_float(cfg.tflops),
        _opt_float(cfg.memory_gib),
    )
    what_if_text = None
    if what_if:
        base = topo if topo is not None else A.synthetic_topology(gpus, spec.name)
        topo, what_if_text = A.apply_what_if(base, what_if)

    coll_rows = [r for r in rows if r.get("kind") == "collective"]
    measured = A.MeasuredComm(coll_rows, build) if coll_rows else None
    proj = cfg.projection
    comms = A.Comms(
        measured,
        A.Projection(dict(proj.efficiency), dict(proj.latency_us)),
        projected_only=what_if is not None,
    )
    build_label = what_if_text or (measured.build if measured else None) or "unmeasured build"
    micro = None if str(cfg.micro_batches) == "auto" else int(cfg.micro_batches)

    preds: list[A.Prediction] = []
    refused: list[tuple[int, int, str]] = []
    sources: dict[str, str] = {}
    computes: list[str] = []
    topology = topo if topo is not None else A.synthetic_topology(gpus, spec.name)
    for input_len in input_lens:
        for output_len in output_lens:
            for batch in batches:
                compute = A.Compute(spec)
                if cfg.calibrate and rows:
                    compute = A.calibrate(compute, shape, rows, batch, input_len, dbytes)
                if compute.source not in computes:
                    computes.append(compute.source)
                wl = A.Workload(
                    batch, input_len, output_len, dbytes, micro,
                    int(cfg.prefill_chunk_tokens), float(cfg.memory_fraction),
                )  # fmt: skip
                for tp, pp, why in A.splits(shape, gpus):
                    if why is not None:
                        if (tp, pp, why) not in refused:
                            refused.append((tp, pp, why))
                        continue
                    placement = A.place(topology, gpus, tp, pp)
                    p = A.predict(shape, tp, pp, wl, comms, compute, placement, spec.memory_gib)
                    preds.append(p)
                    for phase in (p.decode, p.prefill):
                        for c in phase.calls if phase else []:
                            sources.setdefault(f"{c['op']} over {tp if c['op'] != 'send' else 2}",
                                               c["source"])  # fmt: skip
    recs = []
    for input_len in input_lens:
        for output_len in output_lens:
            group = [p for p in preds if (p.input_len, p.output_len) == (input_len, output_len)]
            recs += [(input_len, output_len, r) for r in A.recommend(group, batches, build_label)]

    info = {
        "model": shape.name,
        "gpus": gpus,
        "gpu": asdict(spec),
        "build": build_label,
        "projection": what_if_text is not None,
        "what_if": what_if,
        "topology": topo_source,
        "compute": computes,
        "collectives": sources,
        "rows": len(rows),
    }
    if fmt == "json":
        doc = {
            **info,
            "model_text": A.MODEL_TEXT,
            "refused": [{"tp": t, "pp": p, "why": w} for t, p, w in refused],
            "predictions": [p.to_dict() for p in preds],
            "recommendations": [
                {"input_len": i, "output_len": o, **r.to_dict()} for i, o, r in recs
            ],
        }
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return 0
    print_tables(info, preds, refused, recs)
    return 0


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def print_tables(
    info: dict[str, Any],
    preds: list[A.Prediction],
    refused: list[tuple[int, int, str]],
    recs: list[tuple[int, int, A.Recommendation]],
) -> None:
    from rich.console import Console
    from rich.table import Table

    from gpulane.inference.memory import GiB

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    gpu = info["gpu"]
    head = "PROJECTION (not measured): " if info["projection"] else ""
    console.print(
        f"# gpulane advise: {head}{info['model']} on {info['gpus']} x {gpu['name']}, "
        f"build {info['build']}"
    )
    console.print(f"# topology: {info['topology']}")
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
    for tp, pp, why in refused:
        console.print(f"# {A.split_name(tp, pp)} not possible: {why}")
    console.print(A.MODEL_TEXT)
    console.print(
        f"rule of thumb (seed document, shown beside the prediction, not used for it): "
        f"bandwidth the TP all-reduces need to keep up with compute above "
        f"{100 * A.RULE_OF_THUMB:.0f}% of the link: expect trouble"
    )
    for input_len, output_len, r in recs:
        console.print(f"\nrecommended for {r.goal} (input {input_len}, output {output_len}):")
        for line in r.reasons:
            console.print(f"  - {line}")
