"""What separates a decode step from issue 32's targets, kernel by kernel: the budget each
target leaves, set against what the step's kernels take (profile_decode.py's profiles of
TP rank 0's slice on one GPU, collectives off).

usage: python benchmarks/inference/decode_budget.py DIR [DIR ...] [--variant V] [--gbps R]
    [--md FILE]

Per slice and batch, the median over the profile's runs of variant V (default
``compiled:fused``):

- the roofline (the slice's bytes at the profile's copy rate, or at ``--gbps``: issue 32
  states its targets on the H200 at 4000 GB/s), the step, and the step's weight products
  alone (``gemm_only_ms``: cuBLAS, graph-replayed back to back, nothing between them), each
  as a multiple of the roofline;
- where a ``floor.json`` of floor_probe.py lies in the same DIR and times this slice's
  products: the products alone as its per-product times add up (every layer's four, and
  the LM head by its fit, fixed + bytes / rate), a check that the products cost what they
  cost alone at that shape, whatever runs around them;
- what the kernels of the step are busy with: products, attention, the rest (norms, SiLU x
  up, split-K reductions, embedding, argmax), and the gaps between kernels;
- the target (the 8B's compute alone: 1.2 at TP=1, 1.3 at TP=2, 1.6 at TP=4; the 70B-class
  models': 1.2, their step target applied to the compute alone), the time it allows, and
  what is left of it for everything but the products once they run as fast as they do alone;
- the kernels a layer the target allows at the step's own cost per kernel, (step -
  roofline) / kernels, against the kernels a layer the step runs.

Exit 1 when no profile had the variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)
from gpulane.inference.shapes import packaged_shape  # noqa: E402
from gpulane.inference.sharding import rank_slices  # noqa: E402

# issue 32's targets on the compute alone of a slice (the 70B-class models' 1.2 is a step
# target with the collectives added on both sides; applied here to the compute alone)
TARGETS = {
    ("llama3-8b", 1): 1.2,
    ("llama3-8b", 2): 1.3,
    ("llama3-8b", 4): 1.6,
}
DENSE_70B = ("qwen2.5-72b", "llama3-70b")
DENSE_TARGET = 1.2
FIXED_KERNELS = 3  # a step's kernels outside its layers: embedding, final norm, LM head


def target(model: str, tp: int) -> float | None:
    if model in DENSE_70B and tp in (1, 2, 4):
        return DENSE_TARGET
    return TARGETS.get((model, tp))


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def probe_products_ms(
    floor: dict[str, Any] | None, model: str, tp: int, layers: int, batch: int
) -> float | None:
    """A step's weight products as floor_probe.py timed them one by one: the layer's four
    (rows 1 for batch 1, else 16) times the layers, and the LM head (vocab rows of the rank
    x hidden) by the fit; None when the probe did not time this slice."""
    if not floor:
        return None
    rows = 1 if batch == 1 else 16
    mine = [
        p for p in floor.get("products", [])
        if p["model"] == model and p["tp"] == tp and p["rows"] == rows
    ]  # fmt: skip
    fit = (floor.get("fit") or {}).get(str(rows))
    shape = packaged_shape(model)
    if len(mine) != 4 or not fit or shape is None:
        return None
    head_bytes = rank_slices(shape, tp).vocab * shape.hidden_size * 2
    head_us = fit["fixed_us"] + head_bytes / fit["rate_gbps"] / 1e3
    return (layers * sum(p["us"] for p in mine) + head_us) / 1e3


def budget_rows(
    doc: dict[str, Any],
    variant: str,
    where: str = "",
    gbps: float | None = None,
    floor: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One row per batch of a profile.json document, from its runs of ``variant``; the
    roofline at ``gbps`` when given, else at the profile's copy rate."""
    model, tp, layers = str(doc.get("model")), int(doc.get("tp") or 1), int(doc["layers"])
    scale = float(doc["copy_gbps"]) / gbps if gbps else 1.0
    runs: dict[int, list[dict[str, Any]]] = {}
    for d in doc.get("decode", []):
        if d.get("variant") == variant and "error" not in d:
            runs.setdefault(int(d["batch"]), []).append(d)
    out = []
    for batch, ds in sorted(runs.items()):
        roof = _median([d["roofline_ms"] for d in ds]) * scale
        step = _median([d["step_ms"] for d in ds])
        groups = [d["kernels"]["groups"] for d in ds]

        def busy(name: str, groups: list[dict[str, Any]] = groups) -> float:
            return _median([float(g.get(name, {}).get("ms", 0.0)) for g in groups])

        count = _median([d["kernels"]["count"] for d in ds])
        products_alone = (doc.get("gemm_only_ms") or {}).get(str(batch))
        products, attention, other = busy("matrix products"), busy("attention"), busy("other")
        gaps = max(0.0, step - products - attention - other)
        row: dict[str, Any] = {
            "where": where, "gpu": doc.get("gpu"), "model": model, "layers": layers, "tp": tp,
            "batch": batch, "runs": len(ds), "roofline_ms": roof, "step_ms": step,
            "ratio": step / roof, "products_alone_ms": products_alone,
            "probe_products_ms": probe_products_ms(floor, model, tp, layers, batch),
            "products_ms": products, "attention_ms": attention, "other_ms": other,
            "gaps_ms": gaps, "kernels": count, "kernels_per_layer": count / layers,
            "us_per_kernel": (step - roof) / count * 1e3,
        }  # fmt: skip
        t = target(model, tp)
        row["target"] = t
        if t is not None:
            allowed = t * roof
            row["allowed_ms"] = allowed
            row["rest_ms"] = step - (products_alone if products_alone is not None else products)
            if products_alone is not None:
                row["left_for_rest_ms"] = allowed - products_alone
            # kernels a layer at this step's own cost per kernel that the target allows
            fit = (t - 1) * roof * 1e3 / row["us_per_kernel"]
            row["kernels_per_layer_allowed"] = max(0.0, (fit - FIXED_KERNELS) / layers)
        out.append(row)
    return out


def _floor(base: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((base / "floor.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def collect(dirs: list[Path], variant: str, gbps: float | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for base in dirs:
        floor = _floor(base)
        for path in sorted(base.glob("**/profile.json")):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError) as err:
                print(f"decode_budget: skipped {path}: {err}", file=sys.stderr)
                continue
            if "layers" not in doc:
                continue
            rows += budget_rows(doc, variant, str(path.parent), gbps, floor)
    return rows


def _x(ms: float | None, roof: float) -> str:
    return "-" if ms is None else f"{ms:.3f} ({ms / roof:.2f}x)"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| slice (layers) | TP | batch | roofline ms | step ms | products alone ms | products "
        "as the probe timed them ms | in the "
        "step: products / attention / other / gaps ms | target | allowed ms | left for all "
        "but products ms | all but products now ms | kernels a layer | us per kernel above "
        "roofline | kernels a layer the target allows |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["model"], r["tp"], r["batch"], r["where"])):
        roof = r["roofline_ms"]
        t = r["target"]
        split = " / ".join(
            f"{r[k]:.3f}" for k in ("products_ms", "attention_ms", "other_ms", "gaps_ms")
        )
        left = r.get("left_for_rest_ms")
        lines.append(
            f"| {r['model']} ({r['layers']}) | {r['tp']} | {r['batch']} | {roof:.3f} | "
            f"{_x(r['step_ms'], roof)} | {_x(r['products_alone_ms'], roof)} | "
            f"{_x(r['probe_products_ms'], roof)} | {split} | "
            f"{'-' if t is None else t} | "
            f"{'-' if t is None else format(r['allowed_ms'], '.3f')} | "
            f"{'-' if left is None else format(left, '.3f')} | "
            f"{'-' if t is None else format(r['rest_ms'], '.3f')} | "
            f"{r['kernels_per_layer']:.1f} | {r['us_per_kernel']:.2f} | "
            f"{'-' if t is None else format(r['kernels_per_layer_allowed'], '.1f')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", type=Path, nargs="+")
    ap.add_argument("--variant", default="compiled:fused")
    ap.add_argument("--gbps", type=float, default=None, help="the roofline's rate, GB/s")
    ap.add_argument("--md", type=Path, default=None)
    args = ap.parse_args(argv)
    args.dirs = [real(d) for d in args.dirs]
    if args.gbps is not None and not args.gbps > 0:
        print(
            f"decode_budget: error: --gbps: expected a rate > 0, got {args.gbps}", file=sys.stderr
        )
        return 2
    for d in args.dirs:
        if not d.is_dir():
            print(f"decode_budget: error: {d}: not a folder", file=sys.stderr)
            return 2
    rows = collect(args.dirs, args.variant, args.gbps)
    gpus = sorted({str(r["gpu"]) for r in rows})
    rate = f"at {args.gbps:g} GB/s" if args.gbps else "at each profile's copy rate"
    doc = "\n".join(
        [
            f"# decode budget of issue 32's targets ({args.variant}; {', '.join(gpus) or '-'}; "
            f"roofline {rate})",
            "",
            table(rows),
            "",
        ]
    )
    print(doc, end="")
    if args.md:
        args.md.write_text(doc)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
