"""Decode steps and prefills against their rooflines plus the build's measured collective
time, eager ("before") against compiled ("after"): the table of issue 22.

usage: python benchmarks/inference/step_ratio.py OUTDIR [--md FILE] [--rows FILE]

Reads what `run_gpu.sh OUTDIR decode|decode-70b|prefill` left in OUTDIR:

- ``copy_bw.json``: device copy bandwidth (read + written bytes, the HBM roofline's rate)
  and the bf16 matrix rate of an 8192^3 product (the FLOP roofline's rate);
- ``*/profile.json`` (profile_decode.py: TP=1, one process, every variant of the step,
  and prefills);
- every ``gpulane tokens`` row under OUTDIR (TP=2, 70B), by ``extra.compile`` and
  ``extra.decode_attention``;
- every ``gpulane sweep`` row under OUTDIR (CUDA-graph all_reduce and all_gather of the
  build): the collective time of a step is the calls the step makes
  (``extra.comm_per_step``) timed on those curves (:class:`gpulane.planning.comm.MeasuredComm`).

For a decode step: roofline = the bytes it moves (``gpulane.inference.roofline.step_cost``,
the busiest rank) / copy bandwidth; target step <= 1.2 x (roofline + collectives). For a
prefill: FLOP roofline = its FLOPs / the matrix rate; target TTFT <= 1.3 x (roofline +
collectives). Writes one JSON row per figure (--rows) and a Markdown table (--md, and
stdout).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from gpulane.inference.memory import cache_len
from gpulane.inference.roofline import step_cost
from gpulane.inference.shapes import dtype_bytes, shape_from_config
from gpulane.planning.comm import MeasuredComm
from gpulane.record import read_rows

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: benchmarks.* beside gpulane
    sys.path.insert(0, str(ROOT))

from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)

CONF = Path(__file__).resolve().parents[2] / "gpulane" / "conf" / "model"
TARGET = {"decode": 1.2, "prefill": 1.3}


def shape_of(model: str, layers: int | None = None) -> Any:
    config = yaml.safe_load((CONF / f"{model}.yaml").read_text())
    return shape_from_config(config).with_layers(layers)


def comm_ms(comm: MeasuredComm | None, calls: list[dict[str, Any]], tp: int) -> float | None:
    """The step's collectives timed on the build's measured curves (None: not measured)."""
    total = 0.0
    for c in calls or []:
        if c["op"] == "send":
            continue
        got = comm.time(c["op"], tp, int(c["size_bytes"])) if comm else None
        if got is None:
            return None
        total += int(c["count"]) * got.time_us / 1e3
    return total


def variant(extra: dict[str, Any], op: str) -> str:
    kind = "compiled" if extra.get("compile") else "eager"
    if op == "decode" and extra.get("decode_kernels") == "gemv":
        return "gemv"  # six kernels a dense layer, with their own attention
    return f"{kind}:{extra.get('decode_attention') or 'bmm'}" if op == "decode" else f"{kind}:sdpa"


def from_tokens(
    row: dict[str, Any], comms: dict[str, MeasuredComm], bw: float, tflops: float
) -> dict[str, Any] | None:
    extra = row.get("extra") or {}
    if row.get("status") != "ok" or extra.get("engine", "gpulane") != "gpulane":
        return None
    tp, pp, batch = int(row["tp"]), int(row["pp"]), int(row["batch"])
    shape = shape_of(str(row["model"]), int(row["layers"]))
    dbytes = dtype_bytes(str(row["dtype"]))
    m = int(extra.get("micro_batches") or 1)
    calls = extra.get("comm_per_step") or []
    op = str(row["op"])
    comm = comms.get(str(row.get("build"))) if tp > 1 else None
    coll = comm_ms(comm, calls, tp) if tp > 1 else 0.0
    if op == "decode":
        ctx = cache_len(int(row["input_len"]), int(row["output_len"]))
        cost = step_cost(shape, "decode", -(-batch // m), ctx, dbytes, tp, pp, 0)
        roof = cost.memory_s(bw) * 1e3
        measured = float(row["time_us"]) / 1e3
        roof_what = f"{cost.bytes / 1e9:.2f} GB / {bw:.0f} GB/s"
    else:
        chunks = int(extra.get("prefill_chunks") or 1)
        per = -(-batch // chunks)
        cost = step_cost(shape, "prefill", per, int(row["input_len"]), dbytes, tp, pp, 0)
        roof = chunks * cost.compute_s(tflops) * 1e3
        measured = float(row["ttft_ms"])
        roof_what = f"{chunks * cost.flops / 1e12:.1f} TFLOP / {tflops:.0f} TFLOP/s"
    return figure(
        row["model"], tp, batch, op, variant(extra, op), measured, roof, roof_what, coll,
        extra.get("compile_s"), extra.get("capture_s"), str(row.get("build")),
        int(row["input_len"]), extra.get("compute_only_ms"),
    )  # fmt: skip


def figure(
    model: Any, tp: int, batch: int, op: str, kind: str, measured: float, roof: float,
    roof_what: str, coll: float | None, compile_s: Any, capture_s: Any, build: str,
    input_len: int, compute_only: Any = None,
) -> dict[str, Any]:  # fmt: skip
    bound = roof + (coll or 0.0)
    ratio = measured / bound
    return {
        "model": model, "tp": tp, "batch": batch, "op": op, "variant": kind,
        "input_len": input_len, "build": build, "measured_ms": round(measured, 3),
        "roofline_ms": round(roof, 3), "roofline": roof_what,
        "collectives_ms": None if coll is None else round(coll, 3),
        "compute_only_ms": None if compute_only is None else round(float(compute_only), 3),
        "ratio": round(ratio, 3), "target": TARGET[op],
        "met": ratio <= TARGET[op] if coll is not None else None,
        "compile_s": compile_s, "capture_s": capture_s,
    }  # fmt: skip


def from_profile(doc: dict[str, Any], bw: float, tflops: float) -> list[dict[str, Any]]:
    shape = shape_of(doc["model"], int(doc["layers"]))
    out = []
    for d in doc.get("decode", []):
        if "error" in d:  # a variant that failed: its error is in profile.json
            continue
        cost = step_cost(shape, "decode", int(d["batch"]), int(doc["context"]), 2)
        out.append(figure(
            doc["model"], 1, int(d["batch"]), "decode", d["variant"], float(d["step_ms"]),
            cost.memory_s(bw) * 1e3, f"{cost.bytes / 1e9:.2f} GB / {bw:.0f} GB/s", 0.0,
            d.get("first_step_s") if d.get("compile") else 0.0, None, "one GPU",
            int(doc["input_len"]),
        ))  # fmt: skip
    for p in doc.get("prefill", []):
        if "error" in p:
            continue
        cost = step_cost(shape, "prefill", 1, int(p["input_len"]), 2)
        out.append(figure(
            doc["model"], 1, 1, "prefill", f"{p['variant']}:sdpa", float(p["ttft_ms"]),
            cost.compute_s(tflops) * 1e3, f"{cost.flops / 1e12:.1f} TFLOP / {tflops:.0f} TFLOP/s",
            0.0, p.get("first_s") if p.get("compile") else 0.0, None, "one GPU",
            int(p["input_len"]),
        ))  # fmt: skip
    return out


def table(figures: list[dict[str, Any]]) -> str:
    eager = {
        (f["model"], f["tp"], f["batch"], f["op"], f["input_len"], f["build"]): f["measured_ms"]
        for f in figures
        if f["variant"].startswith("eager:bmm") or f["variant"] == "eager:sdpa"
    }
    lines = [
        "| model | TP | batch | phase | kernels | measured ms | roofline ms | collectives ms "
        "| ratio | target | met | speed-up over eager | compile s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in sorted(
        figures, key=lambda f: (f["model"], f["op"], f["tp"], f["batch"], f["variant"])
    ):
        key = (f["model"], f["tp"], f["batch"], f["op"], f["input_len"], f["build"])
        base = eager.get(key)
        speed = f"{base / f['measured_ms']:.2f}x" if base else "-"
        coll = "-" if f["collectives_ms"] is None else f"{f['collectives_ms']:.3f}"
        met = {True: "yes", False: "no", None: "(no sweep)"}[f["met"]]
        lines.append(
            f"| {f['model']} | {f['tp']} | {f['batch']} | {f['op']} (in {f['input_len']}) | "
            f"{f['variant']} | {f['measured_ms']:.3f} | {f['roofline_ms']:.3f} ({f['roofline']}) "
            f"| {coll} | **{f['ratio']:.2f}** | {f['target']} | {met} | {speed} | "
            f"{f['compile_s'] if f['compile_s'] is not None else '-'} |"
        )
    return "\n".join(lines)


def _rows_under(sub: Path) -> list[dict[str, Any]]:
    """Every row of the runs under ``sub`` as dicts (the planner takes dicts): rows.jsonl,
    else rows.parquet (the compact form benchmarks/ keeps; a missing cell is None)."""
    runs = sorted({f.parent for n in ("rows.jsonl", "rows.parquet") for f in sub.rglob(n)})
    out: list[dict[str, Any]] = []
    for run in runs:
        if (run / "rows.jsonl").exists():
            out += [r.to_dict() for r in read_rows(run)]
            continue
        from gpulane.parquet_rows import read_parquet
        from gpulane.record import row_of

        for r in read_parquet(run / "rows.parquet").to_dict("records"):
            clean = {k: None if isinstance(v, float) and v != v else v for k, v in r.items()}
            out.append(row_of(clean).to_dict())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--md", type=Path, default=None)
    ap.add_argument("--rows", type=Path, default=None)
    args = ap.parse_args(argv)
    args.outdir = real(args.outdir)
    rates = json.loads((args.outdir / "copy_bw.json").read_text())
    bw = float(rates["copy_gbps_read_plus_write_median"])
    tflops = float(rates["matmul_bf16_tflops_median"])
    rows = []
    for sub in sorted(p for p in args.outdir.iterdir() if p.is_dir() and p.name != "advise"):
        rows += _rows_under(sub)  # advise/: the held-out runs, benchmarks/advise
    coll = [r for r in rows if r.get("kind") == "collective" and r.get("status") == "ok"]
    comms = {b: MeasuredComm(coll, b) for b in sorted({str(r.get("build")) for r in coll})}
    figures = []
    for profile in sorted(args.outdir.glob("*/profile.json")):
        figures += from_profile(json.loads(profile.read_text()), bw, tflops)
    for r in rows:
        if r.get("kind") == "tokens" and r.get("op") in ("decode", "prefill"):
            f = from_tokens(r, comms, bw, tflops)
            if f is not None:
                figures.append(f)
    if not figures:
        print(f"no profile.json and no token rows under {args.outdir}", file=sys.stderr)
        return 1
    text = table(figures)
    head = (
        f"copy {bw:.0f} GB/s (read + written), bf16 matrix rate {tflops:.0f} TFLOP/s; "
        f"collectives from the CUDA-graph sweeps of builds: {', '.join(comms) or 'none'}"
    )
    doc = head + "\n\n" + text + "\n"
    print(doc, end="")  # what --md writes, so that the committed table can be regenerated
    if args.md:
        args.md.write_text(doc)
    if args.rows:
        args.rows.write_text("".join(json.dumps(f) + "\n" for f in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
