"""What host cost per launch would explain a call's pipeline prefills (a diagnostic of
issue 32, round 3; not part of the advisor).

usage: python benchmarks/advise/host_sweep.py OUTDIR [MODEL ...]

OUTDIR is what ``run_gpu4.sh`` / ``run_gpu4_round3.sh`` left (``advise/`` and ``runs/``).
For each model, the advice is recomputed from ``advise/`` as ``heldout4.py`` does, but with
the host's time to issue an eager prefill set by hand to 0, 30, 40, 45, 50, 55 and 60 us
per launch (kernels, TP collectives and pipeline sends alike) instead of the one the
advisor fits; the table gives each pipeline split's prefill error against ``runs/`` at
each. Where one host cost puts every small-chunk pipeline within a few percent, the
pipeline's gap is the host's launches; how large that cost is, against what the
calibration rows show of it, says whether the calibration could have seen it.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpulane.planning.compute as compute  # noqa: E402
from benchmarks.advise import heldout4  # noqa: E402

HOST_US = (0, 30, 40, 45, 50, 55, 60)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = Path(args[0])
    runs = [r for r in heldout4.rows_under(out / "runs") if r.get("kind") == "tokens"]
    meas = heldout4.measured_rows(runs)
    models = args[1:] or sorted({str(r["model"]) for r in runs})
    lines = [
        "| model | split | batch | input | " + " | ".join(f"{u} us" for u in HOST_US) + " |",
        "|---|---|---|---|" + "---|" * len(HOST_US),
    ]
    fit = compute._host_fit
    try:
        for model in models:
            mine = [r for r in runs if r["model"] == model]
            layers = int(mine[0]["layers"])
            batches = sorted({int(r["batch"]) for r in mine})
            inputs = sorted({int(r["input_len"]) for r in mine})
            errs: dict[tuple[str, int, int], list[str]] = {}
            for us in HOST_US:
                ms = us / 1e3
                compute._host_fit = lambda rows, t, c, ms=ms: (ms, ms, f"host {ms} ms set")  # type: ignore[assignment,misc]
                doc = heldout4.advise_json(out / "advise", model, layers, batches, inputs,
                                           int(mine[0]["output_len"]), "auto")  # fmt: skip
                for p in doc["predictions"]:
                    if p["prefill"] is None or p["pp"] == 1:
                        continue
                    row = meas.get((model, p["name"], p["batch"], p["input_len"], "prefill"))
                    if row is None:
                        continue
                    e = heldout4.err(
                        float(p["prefill"]["tokens_per_s"]), float(row["tokens_per_s"])
                    )
                    errs.setdefault((p["name"], p["batch"], p["input_len"]), []).append(
                        heldout4.pct(e)
                    )
            for (name, batch, input_len), cells in errs.items():
                lines.append(
                    f"| {model} | {name} | {batch} | {input_len} | " + " | ".join(cells) + " |"
                )
    finally:
        compute._host_fit = fit
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
