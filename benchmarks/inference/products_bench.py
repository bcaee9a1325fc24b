"""The decode products of a TP rank's slice that ``auto`` chooses for, cuBLAS against gpulane's split-K kernel
(``decode_products=auto``), timed as the run's own choice times them
(``gpulane.inference.products``: CUDA-graph replays over weight copies larger than L2).

    python benchmarks/inference/products_bench.py [--out DIR]
    python benchmarks/inference/products_bench.py --device cpu   # the shapes, no timing

llama3-8b and qwen2.5-72b at TP=1, 2 and 4, one row and 16 (batch 1 and 16), the products
``auto`` chooses for (QKV and o_proj; gate/up and down stay inside the compiled MLP) whose
weight is at most ``products.SMALL_BYTES`` (larger ones stay cuBLAS untimed). Prints JSON lines; writes products.jsonl under --out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from gpulane.inference.products import SMALL_BYTES, Products
from gpulane.inference.shapes import shape_from_config
from gpulane.inference.sharding import rank_slices

CONF = Path(__file__).resolve().parents[2] / "gpulane" / "conf" / "model"
MODELS = ("llama3-8b", "qwen2.5-72b")


def products_of(model: str, tp: int) -> list[tuple[str, int, int, bool]]:
    """(product, N, K, bias) of TP rank 0's decode products."""
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / f"{model}.yaml"))
    shape = shape_from_config(cfg)  # type: ignore[arg-type]
    s = rank_slices(shape, tp)
    h = shape.hidden_size
    return [("qkv", s.qkv_out, h, shape.qkv_bias), ("o_proj", h, s.o_in, False)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--device", default="cuda", help="cpu: list the shapes, time nothing")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    rows: list[dict[str, Any]] = []
    try:
        for model in MODELS:
            for tp in (1, 2, 4):
                for name, n, k, bias in products_of(model, tp):
                    if n * k * 2 > SMALL_BYTES:
                        continue
                    w = torch.empty(n, k, device=dev, dtype=torch.bfloat16)
                    b = torch.zeros(n, device=dev, dtype=torch.bfloat16) if bias else None
                    for m in (1, 16):
                        p = Products("auto")
                        choice = p.pick(m, w, b)
                        us = p.timings_us.get(f"{m}x{n}x{k}", {})
                        rows.append({"model": model, "tp": tp, "product": name, "rows": m,
                                     "n": n, "k": k, "mib": round(n * k * 2 / 2**20, 2),
                                     "choice": choice, **{f"{s}_us": t for s, t in us.items()}})  # fmt: skip
                        print(json.dumps(rows[-1]), flush=True)
                    del w
    finally:  # what was measured is kept when a later shape fails
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            with (args.out / "products.jsonl").open("w") as fh:
                for r in rows:
                    fh.write(json.dumps(r) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
