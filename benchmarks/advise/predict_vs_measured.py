"""Predicted (gpulane advise's model) vs measured (gpulane tokens) token rates, per build.

usage: python benchmarks/advise/predict_vs_measured.py [--tokens DIR ...] [options]

For each build (default: nvlink, pcie-host, socket: the 2xH200 box's presets) and each of
TP=2 and PP=2, predicts prefill and decode tokens/s from that build's collective rows
(gpulane sweep run directories, plus nccl-tests logs given as BUILD=FILE) and the
roofline (or the roofline calibrated on one tokens run with --calibrate RUN_DIR), and
puts them beside the `gpulane tokens` rows of the same build, model, split, batch and
input length found under --tokens. The measured columns stay empty when there are no
token rows, and the output says so. Prints a Markdown table; the target is |error| <= 15%.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpulane.analysis.store import find_run_dirs, load_frame, records
from gpulane.collectives.nccl_tests.logs import rows_from_file
from gpulane.inference.shapes import dtype_bytes, shape_from_config
from gpulane.planning.comm import Comms, MeasuredComm, Projection
from gpulane.planning.compute import Compute, GpuSpec, calibrate
from gpulane.planning.placement import place
from gpulane.planning.predict import Workload, predict
from gpulane.topology.model import Topology

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:  # run as a script: benchmarks.* beside gpulane
    sys.path.insert(0, str(ROOT))

from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)

H200X2 = ROOT / "benchmarks" / "collectives" / "h200x2"
DEFAULT_LOGS = [
    f"{b}={H200X2 / f'nt-{op}-{b}.txt'}"
    for b in ("pcie-host", "socket")
    for op in ("all_reduce", "all_gather")
]
NVLINK_ROWS = ROOT / "tests" / "fixtures" / "advise" / "nvlink-rows.jsonl"
TARGET = 0.15


def _model(name: str) -> Any:
    import yaml

    path = ROOT / "gpulane" / "conf" / "model" / f"{name}.yaml"
    return shape_from_config(yaml.safe_load(path.read_text()))


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if out != out else out


def measured_rows(paths: Sequence[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for p in (str(real(Path(x))) for x in paths):
        if Path(p).exists() and (Path(p).is_file() or find_run_dirs(p)):
            rows += [r for r in records(load_frame([p])) if r.get("kind") == "tokens"]
    return [r for r in rows if (r.get("status") or "ok") == "ok"]


def find(
    rows: Sequence[dict[str, Any]], build: str, model: str, tp: int, pp: int, batch: int,
    input_len: int, op: str,
) -> float | None:  # fmt: skip
    for r in rows:
        if (r.get("build"), r.get("model"), r.get("op")) != (build, model, op):
            continue
        if (_num(r.get("tp")), _num(r.get("pp")), _num(r.get("batch"))) != (tp, pp, batch):
            continue
        if _num(r.get("input_len")) != input_len:
            continue
        return _num(r.get("tokens_per_s"))
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # the nvlink sweep rows that are committed (benchmarks/advise/README.md says which)
    ap.add_argument("--collectives", nargs="*", default=[str(NVLINK_ROWS)])
    ap.add_argument("--log", nargs="*", default=DEFAULT_LOGS, metavar="BUILD=FILE",
                    help="nccl-tests logs of a build (text or -J JSON)")  # fmt: skip
    ap.add_argument("--tokens", nargs="*", default=[str(ROOT / "benchmarks" / "inference")])
    ap.add_argument("--builds", default="nvlink,pcie-host,socket")
    ap.add_argument("--model", default="llama3-8b")
    ap.add_argument("--batch", default="1,16")
    ap.add_argument("--input-len", default="1024")
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--topology", default=str(ROOT / "benchmarks/topology/results-h200x2/gpulane-topo.json"))  # fmt: skip
    ap.add_argument("--hbm-gbps", type=float, default=4000.0)
    ap.add_argument("--tflops", type=float, default=700.0)
    ap.add_argument("--calibrate", nargs="*", default=None, metavar="RUN_DIR",
                    help="calibrate compute on the tokens rows of these runs (pp=1); runs "
                         "at two TP degrees also fit a fixed time per layer")  # fmt: skip
    args = ap.parse_args(argv)

    shape = _model(args.model)
    dbytes = dtype_bytes("bf16")
    gpu = GpuSpec("H200", args.hbm_gbps, args.tflops, 140.4)
    import json

    topo = Topology.from_json(json.loads(Path(args.topology).read_text()))
    coll = [r for r in records(load_frame(args.collectives)) if r.get("kind") == "collective"]
    for spec in args.log:
        build, _, path = spec.partition("=")
        path = str(real(Path(path)))
        if Path(path).exists():
            coll += [r.to_dict() for r in rows_from_file(path, build=build)]
    tokens = measured_rows(args.tokens)
    calib_rows = measured_rows(args.calibrate) if args.calibrate else []
    proj = Projection({"nvlink": 0.72, "pcie": 0.8}, {"nvlink": 6.0, "pcie": 10.0})

    print(f"# model {shape.name}, output_len {args.output_len}, bf16, 2 x H200 "
          f"(HBM {gpu.hbm_gbps:.0f} GB/s, {gpu.tflops:.0f} TFLOP/s)")  # fmt: skip
    print("| build | split | batch | input | prefill tok/s pred | meas | err | "
          "decode tok/s pred | meas | err | collectives used |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    errors: list[float] = []
    fits: dict[str, None] = {}
    for build in args.builds.split(","):
        rows = [r for r in coll if r.get("build") == build]
        if not rows:
            print(f"| {build} | no collective rows | | | | | | | | | |")
            continue
        comms = Comms(MeasuredComm(rows, build), proj)
        for input_len in _ints(args.input_len):
            for batch in _ints(args.batch):
                compute = Compute(gpu)
                if calib_rows:
                    compute = calibrate(compute, shape, calib_rows, batch, input_len, dbytes)
                fits[f"batch {batch} input {input_len}: {compute.source}"] = None
                wl = Workload(batch, input_len, args.output_len, dbytes)
                for tp, pp in ((2, 1), (1, 2)):
                    p = predict(shape, tp, pp, wl, comms, compute, place(topo, 2, tp, pp),
                                  gpu.memory_gib)  # fmt: skip
                    if p.decode is None or p.prefill is None:
                        print(f"| {build} | {p.name} | {batch} | {input_len} | does not fit |")
                        continue
                    cells = []
                    for op, pred in (("prefill", p.prefill.tokens_per_s),
                                     ("decode", p.decode.tokens_per_s)):  # fmt: skip
                        meas = find(tokens, build, shape.name, tp, pp, batch, input_len, op)
                        err = "" if meas is None else f"{100 * (pred / meas - 1):+.0f}%"
                        if meas is not None:
                            errors.append(abs(pred / meas - 1))
                        cells += [f"{pred:.0f}", "" if meas is None else f"{meas:.0f}", err]
                    used = "; ".join(p.decode.sources[:1] + p.prefill.sources[:1])
                    print(f"| {build} | {p.name} | {batch} | {input_len} | "
                          + " | ".join(cells) + f" | {used} |")  # fmt: skip
    print()
    print(f"# compute: {'calibrated on ' + ' '.join(args.calibrate) if calib_rows else 'roofline'}")
    for fit in fits:
        print(f"#   {fit}")
    if not tokens:
        print("# measured: no `gpulane tokens` rows under "
              + ", ".join(args.tokens) + "; the measured columns are empty")  # fmt: skip
        return 0
    within = sum(e <= TARGET for e in errors)
    print(f"# within {100 * TARGET:.0f}%: {within} of {len(errors)} figures")
    return 0 if errors and within == len(errors) else 1


if __name__ == "__main__":
    sys.exit(main())
