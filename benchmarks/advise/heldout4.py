"""The advisor on 4 GPUs (issue 32): what `gpulane advise` predicts for TP=4, PP=2xTP=2 and
PP=4 from what it measured itself (`measure=true`: the collectives, the topology, a short
run of each model at TP=1 and TP=2), against `gpulane tokens` runs of those splits; and
the decode step against its roofline plus its collectives.

usage: python benchmarks/advise/heldout4.py OUTDIR [--md FILE] [--rows FILE] [--gpu auto]

OUTDIR is what ``benchmarks/advise/run_gpu.sh OUTDIR`` left:

- ``advise/``: the rows `gpulane advise measure=true` made (collective sweeps with the
  topology.json it probed beside them, the calibration runs of each model). The advice
  is recomputed from them with the code of this checkout (``gpulane advise run=OUTDIR/advise
  topology=auto``, in this process), so a later change of the model is judged on the
  same measurements; nothing under ``runs/`` goes into it.
- ``runs/``: the measured side, `gpulane tokens` of each model at the three splits.
- ``decode/`` (llama3-8b at TP=1, 2, 4) and ``copy_bw.json`` (the HBM copy rate): the
  decode ratios; the 70B-class figures are the dense model's rows of advise/ (TP=1, TP=2)
  and runs/ (TP=4).

Prints a Markdown table in the form of the 2-GPU held-out table (``heldout.py``), per
model, split, batch and prompt length: predicted and measured prefill and decode tokens/s
and the error; per model, batch and prompt length whether the split the advisor predicts
best (most decode tok/s; shortest TTFT) is the measured best; then the decode ratios.
Where a split with a prediction has no runs (a call cut for budget), the recommendation
of that case is not judged ("-"); two more columns judge the advisor's best among the
splits that were measured, a recommended split that was not is marked "(not measured)",
and the summary line names those cases.
Exit 0 when every figure is measured and within 15 % and every pick right, 1 otherwise
(or when nothing was measured).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: benchmarks.* beside gpulane
    sys.path.insert(0, str(ROOT))

from benchmarks.advise.heldout import err, pct, rows_under, run_dirs  # noqa: E402
from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)
from benchmarks.inference.step_ratio import from_tokens  # noqa: E402
from gpulane.inference.shapes import packaged_shape  # noqa: E402
from gpulane.planning.comm import MeasuredComm  # noqa: E402
from gpulane.planning.fixed import stage_launches  # noqa: E402

TARGET = 0.15
SPLITS = ("TP=4", "PP=2xTP=2", "PP=4")


def splits_for(gpus: int) -> tuple[str, ...]:
    """The splits of ``gpus`` GPUs, as the table lists them (TP first)."""
    out = []
    for tp in range(gpus, 0, -1):
        if gpus % tp == 0:
            pp = gpus // tp
            out.append(f"TP={tp}" if pp == 1 else (f"PP={pp}" if tp == 1 else f"PP={pp}xTP={tp}"))
    return tuple(out)


RATIO_TARGET = {"dense": 1.2}
DEFAULT_RATES = {"copy_gbps_read_plus_write_median": 4000.0, "matmul_bf16_tflops_median": 700.0}


def split_of(row: dict[str, Any]) -> str:
    tp, pp = int(row["tp"]), int(row["pp"])
    if pp == 1:
        return f"TP={tp}"
    return f"PP={pp}" if tp == 1 else f"PP={pp}xTP={tp}"


def advise_json(
    advise_dir: Path, model: str, layers: int, batches: Sequence[int], input_lens: Sequence[int],
    output_len: int, gpu: str, gpus: int = 4,
) -> dict[str, Any]:  # fmt: skip
    """`gpulane advise` on the rows it measured (format=json), run in this process."""
    from gpulane.commands.advise import main

    argv = [
        f"model={model}", f"model.num_layers={layers}", f"gpus={gpus}",
        f"batch={','.join(map(str, batches))}", f"input_len={','.join(map(str, input_lens))}",
        f"output_len={output_len}", f"run={advise_dir}", "topology=auto", f"gpu={gpu}",
        "calibrate=true", "measure=false", "format=json",
    ]  # fmt: skip
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = main(argv)
    if status != 0:
        raise SystemExit(f"gpulane advise {' '.join(argv)}: exit {status}")
    doc: dict[str, Any] = json.loads(buf.getvalue())
    return doc


def measured_rows(runs: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """(model, split, batch, input_len, op) -> the row (the last run of a point wins)."""
    out = {}
    for r in runs:
        key = (r["model"], split_of(r), int(r["batch"]), int(r["input_len"]), str(r["op"]))
        out[key] = r
    return out


def picks(
    model: str, batch: int, input_len: int, pred: dict[str, dict[str, Any]],
    meas: dict[tuple[Any, ...], dict[str, Any]], splits: Sequence[str] = SPLITS,
) -> list[dict[str, Any]]:  # fmt: skip
    """The split predicted best and the measured best, for decode (most tok/s) and
    prefill (shortest TTFT). ``right`` judges the recommendation only where every split
    with a prediction was measured; ``measured_right`` judges the advisor's order among
    the splits that were (its best of those against their measured best; None with
    fewer than 2), and ``recommended_measured`` says whether the recommended split was."""
    out = []
    for goal in ("decode", "prefill"):
        names = [n for n in splits if n in pred]

        def predicted(n: str, goal: str = goal) -> float:
            return -float(pred[n][goal]["tokens_per_s"])

        def measured(n: str, goal: str = goal) -> float | None:
            row = meas.get((model, n, batch, input_len, goal))
            return None if row is None else -float(row["tokens_per_s"])

        rec = min(names, key=predicted) if names else None
        got = {n: m for n in names if (m := measured(n)) is not None}
        have = list(got)
        best = min(have, key=got.__getitem__) if have else None
        complete = len(have) == len(names) and len(names) > 1
        among = min(have, key=predicted) if len(have) > 1 else None
        out.append({
            "model": model, "batch": batch, "input_len": input_len, "goal": goal,
            "recommended": rec, "measured_best": best,
            "right": (rec == best) if complete else None,
            "recommended_measured": rec in have,
            "predicted_best_measured": among,
            "measured_right": None if among is None else among == best,
        })  # fmt: skip
    return out


def advice_table(
    out: Path, gpu: str, gpus: int = 4
) -> tuple[list[str], list[dict[str, Any]], int, int, int, int]:
    splits = splits_for(gpus)
    runs = [r for r in rows_under(out / "runs") if r.get("kind") == "tokens"]
    meas = measured_rows(runs)
    models: dict[str, int] = {}
    for r in runs:
        models.setdefault(str(r["model"]), int(r["layers"]))
    lines = [
        "| model (layers) | split | batch | input | prefill tok/s pred | meas | err | "
        "decode tok/s pred | meas | err | collectives |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    figures: list[dict[str, Any]] = []
    choice: list[dict[str, Any]] = []
    heads: list[str] = []
    for model, layers in models.items():
        mine = [r for r in runs if r["model"] == model]
        batches = sorted({int(r["batch"]) for r in mine})
        input_lens = sorted({int(r["input_len"]) for r in mine})
        output_len = int(mine[0]["output_len"])
        doc = advise_json(out / "advise", model, layers, batches, input_lens, output_len, gpu, gpus)
        heads.append(
            f"# {model} ({layers} layers): topology {doc['topology']}; compute: "
            + "; ".join(doc["compute"])
        )
        for batch in batches:
            for input_len in input_lens:
                pred = {
                    p["name"]: p
                    for p in doc["predictions"]
                    if (p["batch"], p["input_len"]) == (batch, input_len) and p["decode"]
                }
                for name in splits:
                    p = pred.get(name)
                    if p is None:
                        lines.append(f"| {model} ({layers}) | {name} | {batch} | {input_len} | "
                                     "no prediction (no fit) |" + " |" * 6)  # fmt: skip
                        continue
                    cells = []
                    for op in ("prefill", "decode"):
                        value = float(p[op]["tokens_per_s"])
                        row = meas.get((model, name, batch, input_len, op))
                        got = None if row is None else float(row["tokens_per_s"])
                        e = err(value, got)
                        cells += [f"{value:.0f}", "" if got is None else f"{got:.0f}", pct(e)]
                        figures.append({
                            "model": model, "layers": layers, "split": name, "batch": batch,
                            "input_len": input_len, "op": op, "predicted_tokens_per_s": value,
                            "measured_tokens_per_s": got, "error": e,
                        })  # fmt: skip
                    used = "; ".join(
                        dict.fromkeys(p["decode"]["sources"] + p["prefill"]["sources"])
                    )
                    path = p["placement"].get("tp_label") or p["placement"].get("pp_label") or "-"
                    lines.append(f"| {model} ({layers}) | {name} | {batch} | {input_len} | "
                                 + " | ".join(cells) + f" | {used} [{path}] |")  # fmt: skip
                choice += picks(model, batch, input_len, pred, meas, splits)
    within = [f for f in figures if f["error"] is not None]
    ok = sum(abs(f["error"]) <= TARGET for f in within)
    right = sum(bool(p["right"]) for p in choice if p["right"] is not None)
    judged = sum(p["right"] is not None for p in choice)
    # where a split was not measured (a call cut for budget) the recommendation is not
    # judged; the advisor's order among the splits that were is, in two more columns
    partial = any(p["right"] is None and p["measured_best"] for p in choice)
    head = "| model | batch | input | best for | recommended | measured best | right |"
    if partial:
        head += " of the measured splits: predicted best | right |"

    def yes(v: bool | None) -> str:
        return "-" if v is None else ("yes" if v else "NO")

    def pick_line(p: dict[str, Any]) -> str:
        rec = (
            p["recommended"] if p["recommended_measured"] else f"{p['recommended']} (not measured)"
        )
        line = (f"| {p['model']} | {p['batch']} | {p['input_len']} | {p['goal']} | {rec} | "
                f"{p['measured_best'] or '-'} | {yes(p['right'])} |")  # fmt: skip
        if partial:
            line += f" {p['predicted_best_measured'] or '-'} | {yes(p['measured_right'])} |"
        return line

    text = [
        *heads,
        "",
        *lines,
        "",
        head,
        "|---|---|---|---|---|---|---|" + ("---|---|" if partial else ""),
        *[pick_line(p) for p in choice],
    ]
    return text, figures + choice, ok, len(within), right, judged


def ratio_table(out: Path, dense: str | None) -> tuple[list[str], list[dict[str, Any]]]:
    """Decode step / (roofline + its collectives), and compute alone / roofline."""
    rates_file = out / "copy_bw.json"
    try:
        rates = json.loads(rates_file.read_text())
        said = f"copy {float(rates['copy_gbps_read_plus_write_median']):.0f} GB/s measured"
    except (OSError, ValueError, KeyError):
        rates, said = DEFAULT_RATES, "no copy_bw.json: 4000 GB/s assumed"
    bw = float(rates["copy_gbps_read_plus_write_median"])
    tflops = float(rates["matmul_bf16_tflops_median"])
    advise_rows = rows_under(out / "advise")
    coll = [r for r in advise_rows if r.get("kind") == "collective"]
    comms = {b: MeasuredComm(coll, b) for b in sorted({str(r.get("build")) for r in coll})}
    tokens = [r for r in rows_under(out / "decode") if r.get("kind") == "tokens"]
    if dense:
        tokens += [r for r in advise_rows if r.get("kind") == "tokens" and r["model"] == dense]
        tokens += [
            r for r in rows_under(out / "runs")
            if r.get("kind") == "tokens" and r["model"] == dense and int(r["pp"]) == 1
        ]  # fmt: skip
    figs = []
    for r in tokens:
        if r.get("op") != "decode":
            continue
        f = from_tokens(r, comms, bw, tflops)
        if f is None:
            continue
        f["layers"] = int(r["layers"])
        co = f.get("compute_only_ms")
        f["compute_ratio"] = None if co is None else round(co / f["roofline_ms"], 3)
        if co is None and int(r["tp"]) == 1:  # one GPU: the step is compute alone
            co = f["measured_ms"]
            f["compute_ratio"] = round(co / f["roofline_ms"], 3)
        # the per-kernel floor: what compute alone takes above the roofline, per kernel
        # the step launches (gpulane.planning.fixed's counts; embedding and head: 3)
        shape = packaged_shape(str(r["model"]))
        if co is not None and shape is not None:
            compiled = bool((r.get("extra") or {}).get("compile"))
            kernels = stage_launches(shape.with_layers(f["layers"]), f["tp"], 1, 0, compiled)[0]
            f["kernels"] = kernels + 3
            f["floor_us_per_kernel"] = round((co - f["roofline_ms"]) / f["kernels"] * 1e3, 2)
        figs.append(f)
    lines = [
        f"# decode steps ({said}; collectives on the CUDA-graph curves advise measured)",
        "",
        "| model (layers) | TP | batch | input | step ms | roofline ms | collectives ms | "
        "step / (roofline + comm) | compute alone ms | compute alone / roofline | "
        "kernels | above roofline, us per kernel | attention |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in sorted(figs, key=lambda f: (f["model"], f["tp"], f["batch"], f["input_len"])):
        coll_ms = "-" if f["collectives_ms"] is None else f"{f['collectives_ms']:.3f}"
        co = "-" if f["compute_ratio"] is None else f"{f['compute_ratio'] * f['roofline_ms']:.3f}"
        cr = "-" if f["compute_ratio"] is None else f"{f['compute_ratio']:.2f}"
        lines.append(
            f"| {f['model']} ({f['layers']}) | {f['tp']} | {f['batch']} | {f['input_len']} | "
            f"{f['measured_ms']:.3f} | {f['roofline_ms']:.3f} | {coll_ms} | {f['ratio']:.2f} | "
            f"{co} | {cr} | {f.get('kernels', '-')} | {f.get('floor_us_per_kernel', '-')} | "
            f"{f['variant']} |"
        )
    return lines, figs


def profile_table(out: Path) -> list[str]:
    """The kernels a decode step launches, counted by torch.profiler (profile_decode.py's
    profile.json, where the run left one): the step from a CUDA graph against its
    roofline, the weight products alone, and the time above the roofline per kernel."""
    path = out / "profile" / "profile.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    lines = [
        f"# decode steps profiled ({doc.get('model')}, {doc.get('layers')} layers, one GPU, "
        f"input {doc.get('input_len')}, copy {doc.get('copy_gbps')} GB/s; profile_decode.py)",
        "",
        "| batch | variant | step ms | roofline ms | step / roofline | kernels | "
        "GEMMs alone ms | above roofline, us per kernel |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in doc.get("decode", []):
        if "error" in d:
            lines.append(f"| {d['batch']} | {d['variant']} | failed: {d['error'][:80]} |"
                         + " |" * 5)  # fmt: skip
            continue
        count = int(d["kernels"]["count"])
        gemm = doc.get("gemm_only_ms", {}).get(str(d["batch"]))
        # no kernels: a CPU dry run (the profiler saw no CUDA kernels)
        above = 1e3 * (float(d["step_ms"]) - float(d["roofline_ms"])) / count if count else None
        lines.append(
            f"| {d['batch']} | {d['variant']} | {d['step_ms']:.3f} | {d['roofline_ms']:.3f} | "
            f"{d['ratio']:.2f} | {count} | {'-' if gemm is None else f'{gemm:.3f}'} | "
            f"{'-' if above is None else f'{above:.2f}'} |"
        )
    return ["", *lines]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--md", type=Path, default=None)
    ap.add_argument("--rows", type=Path, default=None)
    ap.add_argument("--gpu", default="auto", help="gpu_specs key (auto: the topology's)")
    ap.add_argument("--dense", default="qwen2.5-72b", help="the 70B-class model of runs/")
    ap.add_argument("--gpus", type=int, default=4, help="the GPUs advised on (4, or 2)")
    args = ap.parse_args(argv)
    out: Path = real(args.outdir)
    if not run_dirs(out / "runs") or not run_dirs(out / "advise"):
        print(f"{out}: no advise/ rows or no runs/ rows (run_gpu.sh did not get that far)",
              file=sys.stderr)  # fmt: skip
        return 1
    text, rows, ok, n, right, judged = advice_table(out, args.gpu, args.gpus)
    ratio_lines, ratio_rows = ratio_table(out, args.dense)
    summary = (f"# within {100 * TARGET:.0f}%: {ok} of {n} figures; recommendation right in "
               f"{right} of {judged} cases")  # fmt: skip
    unmeasured = [r for r in rows if "error" in r and r["measured_tokens_per_s"] is None]
    among = [r for r in rows if r.get("right") is None and r.get("measured_right") is not None]
    if unmeasured:
        gaps = [f"{r['model']} batch {r['batch']} input {r['input_len']} {r['goal']}: "
                f"{r['recommended']}" for r in among if not r["recommended_measured"]]  # fmt: skip
        summary += (
            f"; {len(unmeasured)} predicted figures not measured; among the measured splits "
            f"the advisor's best right in {sum(bool(r['measured_right']) for r in among)} of "
            f"{len(among)} cases; recommended split not measured in {len(gaps)}"
            + (f" ({'; '.join(gaps)})" if gaps else "")
        )
    doc = "\n".join([*text, "", summary, "", *ratio_lines, *profile_table(out)])
    # a packed OUTDIR was read from its unpacked copy: name its files as the user did
    doc = doc.replace(str(out), str(args.outdir))
    print(doc)
    if args.md:
        args.md.write_text(doc + "\n")
    if args.rows:
        args.rows.write_text("".join(json.dumps(r) + "\n" for r in rows + ratio_rows))
    # a split not measured is a figure not checked: never a pass
    among_ok = all(r["measured_right"] for r in among)
    return 0 if n and ok == n and right == judged and not unmeasured and among_ok else 1


if __name__ == "__main__":
    sys.exit(main())
