"""The advisor on models its fit never saw: calibrated on llama3-8b's token rows only,
predicting llama3-70b and mixtral-8x7b (layers cut to what the runs used), TP=2 and PP=2,
on each build's measured collective curves, against `gpulane tokens` rows of those runs.

usage: python benchmarks/advise/heldout.py DIR [DIR ...] [--md FILE] [--rows FILE]
           [--calibration-model llama3-8b] [--builds nvlink,pcie-host,socket]
           [--topology FILE] [--hbm-gbps 4000 --tflops 700]

DIR is what `benchmarks/inference/run_gpu.sh OUT advise-BUILD` left under OUT/advise
(several: the calls of the three builds, read together):
``calib/`` (llama3-8b at TP=1 and TP=2 with compute-only times), ``coll/`` (each build's
CUDA-graph all_reduce, all_gather and sendrecv sweeps) and ``runs/`` (the held-out
models at TP=2 and PP=2 on each build, batch 1 and 16). Nothing of the held-out models'
rows goes into the prediction: the compute model's factor and its per-kernel and
per-GB times come from llama3-8b (``gpulane.planning.compute.calibrate`` carries them
over by the held-out layers' kernel and elementwise counts), every collective time from
the build's curves.

Prints a Markdown table: per build, model, split and batch the predicted and measured
decode and prefill tokens/s and the error; per build, model and batch whether the split
the advisor recommends (most decode tok/s; shortest request) is the measured best.
Target: every figure within 15 % and every recommendation right. Exit 0 when met.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpulane.inference.shapes import ModelShape, dtype_bytes, packaged_shape
from gpulane.parquet_rows import read_parquet
from gpulane.planning.comm import Comms, MeasuredComm, Projection
from gpulane.planning.compute import Compute, GpuSpec, calibrate
from gpulane.planning.placement import place
from gpulane.planning.predict import Prediction, Workload, predict
from gpulane.record import Row, read_rows, row_of
from gpulane.topology.model import Topology

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: benchmarks.* beside gpulane
    sys.path.insert(0, str(ROOT))

from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)

TOPOLOGY = ROOT / "benchmarks/topology/results-h200x2/gpulane-topo.json"
TARGET = 0.15
SPLITS = ((2, 1), (1, 2))


def run_dirs(path: Path) -> list[Path]:
    """The run directories under ``path``: those with rows.jsonl, or rows.parquet (the
    compact form benchmarks/ keeps its rows in)."""
    if not path.exists():
        return []
    return sorted({f.parent for n in ("rows.jsonl", "rows.parquet") for f in path.rglob(n)})


def rows_under(path: Path) -> list[dict[str, Any]]:
    rows: list[Row] = []
    for run in run_dirs(path):
        if (run / "rows.jsonl").exists():
            rows += read_rows(run)
        else:  # a missing cell is None, as in the JSON Lines
            frame = read_parquet(run / "rows.parquet")
            rows += [
                row_of({k: None if isinstance(v, float) and v != v else v for k, v in r.items()})
                for r in frame.to_dict("records")
            ]
    # as dicts: the planner (MeasuredComm, calibrate) takes its rows as its frames' records
    return [r.to_dict() for r in rows if (r.status or "ok") == "ok"]


def measured_of(
    rows: Sequence[dict[str, Any]], build: str, model: str, tp: int, pp: int, batch: int
) -> dict[str, dict[str, Any]]:
    """The run's prefill and decode rows (the last run of the point wins)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.get("kind") != "tokens" or (r.get("build"), r.get("model")) != (build, model):
            continue
        if (int(r["tp"]), int(r["pp"]), int(r["batch"])) == (tp, pp, batch):
            out[str(r["op"])] = r
    return out


def err(pred: float, meas: float | None) -> float | None:
    return None if not meas else pred / meas - 1


def pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.0f}%"


def request_ms(ttft_ms: float, itl_ms: float, output_len: int) -> float:
    return ttft_ms + max(0, output_len - 1) * itl_ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", type=Path, nargs="+")
    ap.add_argument("--md", type=Path, default=None)
    ap.add_argument("--rows", type=Path, default=None)
    ap.add_argument("--calibration-model", default="llama3-8b")
    ap.add_argument("--builds", default="nvlink,pcie-host,socket")
    ap.add_argument("--held-out", default=None, metavar="MODELS",
                    help="models to predict (default: every model of runs/ but the "
                         "calibration model)")  # fmt: skip
    ap.add_argument("--topology", type=Path, default=TOPOLOGY)
    ap.add_argument("--hbm-gbps", type=float, default=4000.0)
    ap.add_argument("--tflops", type=float, default=700.0)
    args = ap.parse_args(argv)
    args.dirs = [real(d) for d in args.dirs]

    gpu = GpuSpec("H200", args.hbm_gbps, args.tflops, 140.4)
    topo = Topology.from_json(json.loads(args.topology.read_text()))

    def under(sub: str) -> list[dict[str, Any]]:
        return [r for d in args.dirs for r in rows_under(d / sub)]

    calib = [r for r in under("calib") if r.get("model") == args.calibration_model]
    coll = [r for r in under("coll") if r.get("kind") == "collective"]
    runs = [r for r in under("runs") if r.get("kind") == "tokens"]
    if not calib or not runs:
        where = ", ".join(str(d) for d in args.dirs)
        print(f"no calibration rows of {args.calibration_model} (calib/) or no held-out "
              f"runs (runs/) under {where}", file=sys.stderr)  # fmt: skip
        return 1
    proj = Projection({"nvlink": 0.72, "pcie": 0.8}, {"nvlink": 6.0, "pcie": 10.0})
    # the held-out models as run: their names and layer counts from the rows
    wanted = args.held_out.split(",") if args.held_out else None
    held: dict[str, ModelShape] = {}
    for r in runs:
        base = packaged_shape(str(r["model"]))
        name = str(r["model"])
        if base is None or (name not in wanted if wanted else name == args.calibration_model):
            continue
        held[name] = base.with_layers(int(r["layers"]))
    lines = [
        "| build | model (layers) | split | batch | prefill tok/s pred | meas | err | "
        "decode tok/s pred | meas | err | collectives |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    figures: list[dict[str, Any]] = []
    picks: list[dict[str, Any]] = []
    fits: dict[str, None] = {}
    for build in args.builds.split(","):
        build_rows = [r for r in coll if r.get("build") == build]
        if not build_rows:
            lines.append(f"| {build} | no collective rows (coll/) |" + " |" * 9)
            continue
        comms = Comms(MeasuredComm(build_rows, build), proj)
        for name, shape in held.items():
            for batch in sorted({int(r["batch"]) for r in runs if r["model"] == name}):
                sample = next(r for r in runs if r["model"] == name and int(r["batch"]) == batch)
                input_len, output_len = int(sample["input_len"]), int(sample["output_len"])
                dbytes = dtype_bytes(str(sample["dtype"]))
                compute = calibrate(Compute(gpu), shape, calib, batch, input_len, dbytes)
                fits[f"{name} batch {batch}: {compute.source}"] = None
                wl = Workload(batch, input_len, output_len, dbytes)
                preds: dict[str, Prediction] = {}
                meas: dict[str, dict[str, dict[str, Any]]] = {}
                for tp, pp in SPLITS:
                    p = predict(shape, tp, pp, wl, comms, compute, place(topo, 2, tp, pp),
                                gpu.memory_gib)  # fmt: skip
                    m = measured_of(runs, build, name, tp, pp, batch)
                    if p.decode is None or p.prefill is None:
                        lines.append(
                            f"| {build} | {name} | {p.name} | {batch} | no fit |" + " |" * 6
                        )
                        continue
                    preds[p.name], meas[p.name] = p, m
                    cells = []
                    for op, value in (("prefill", p.prefill.tokens_per_s),
                                      ("decode", p.decode.tokens_per_s)):  # fmt: skip
                        got = m.get(op, {}).get("tokens_per_s")
                        e = err(value, got)
                        cells += [f"{value:.0f}", "" if got is None else f"{got:.0f}", pct(e)]
                        figures.append({"build": build, "model": name, "layers": shape.num_layers,
                                        "split": p.name, "batch": batch, "op": op,
                                        "predicted_tokens_per_s": value, "measured_tokens_per_s": got,
                                        "error": e})  # fmt: skip
                    used = "; ".join(dict.fromkeys(p.decode.sources + p.prefill.sources))
                    lines.append(f"| {build} | {name} ({shape.num_layers}) | {p.name} | {batch} | "
                                 + " | ".join(cells) + f" | {used} |")  # fmt: skip
                picks += recommendation_checks(build, name, batch, output_len, preds, meas)
    within = [f for f in figures if f["error"] is not None]
    ok = sum(abs(f["error"]) <= TARGET for f in within)
    right = sum(p["right"] for p in picks if p["right"] is not None)
    judged = sum(p["right"] is not None for p in picks)
    out = [
        f"# calibrated on {args.calibration_model} only ({len(calib)} rows); held out: "
        + ", ".join(f"{n} ({s.num_layers} layers)" for n, s in held.items())
        + f"; H200 roofline at {gpu.hbm_gbps:.0f} GB/s and {gpu.tflops:.0f} TFLOP/s",
        "",
        *lines,
        "",
        "| build | model | batch | goal | recommended | measured best | right |",
        "|---|---|---|---|---|---|---|",
        *[pick_line(p) for p in picks],
        "",
        *[f"# compute: {f}" for f in fits],
        f"# within {100 * TARGET:.0f}%: {ok} of {len(within)} figures; recommendation right "
        f"in {right} of {judged} cases",
    ]
    text = "\n".join(out)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")
    if args.rows:
        args.rows.write_text("".join(json.dumps(f) + "\n" for f in figures + picks))
    return 0 if within and ok == len(within) and right == judged else 1


def pick_line(p: dict[str, Any]) -> str:
    right = "-" if p["right"] is None else ("yes" if p["right"] else "NO")
    return (
        f"| {p['build']} | {p['model']} | {p['batch']} | {p['goal']} | {p['recommended']} | "
        f"{p['measured_best'] or '-'} | {right} |"
    )


def recommendation_checks(
    build: str, model: str, batch: int, output_len: int, preds: dict[str, Prediction],
    meas: dict[str, dict[str, dict[str, Any]]],
) -> list[dict[str, Any]]:  # fmt: skip
    """Throughput (most decode tok/s) and latency (shortest request) picks, predicted and
    measured, over the splits both have."""
    out = []
    for goal in ("throughput", "latency"):

        def predicted(name: str, goal: str = goal) -> float:
            p = preds[name]
            assert p.decode is not None and p.prefill is not None
            if goal == "throughput":
                return -p.decode.tokens_per_s
            return request_ms(p.prefill.time_ms, p.decode.time_ms, output_len)

        def measured(name: str, goal: str = goal) -> float | None:
            m = meas.get(name, {})
            if "decode" not in m or "prefill" not in m:
                return None
            if goal == "throughput":
                return -float(m["decode"]["tokens_per_s"])
            itl = float(m["decode"]["time_us"]) / 1e3
            return request_ms(float(m["prefill"]["ttft_ms"]), itl, output_len)

        names = list(preds)
        rec = min(names, key=predicted) if names else None
        scored = [(measured(n), n) for n in names]
        best = min((s for s in scored if s[0] is not None), default=None)
        complete = all(s[0] is not None for s in scored) and len(names) > 1
        out.append({
            "build": build, "model": model, "batch": batch, "goal": goal, "recommended": rec,
            "measured_best": best[1] if best else None,
            "right": (rec == best[1]) if (complete and best) else None,
        })  # fmt: skip
    return out


if __name__ == "__main__":
    sys.exit(main())
