"""Decode attention kernels alone, as CUDA-graph replays: ``decode_attention=triton`` (split
+ merge, two kernels) beside ``fused`` (one kernel: with this step's k and v handed over
and roped inside, and without), over launch shapes of the fused kernel; and cuBLAS's
one-row products with and without reduced-precision split-K reductions allowed.

    python benchmarks/inference/attention_kernels.py [--out DIR] [--rounds 2]
    TRITON_INTERPRET=1 python benchmarks/inference/attention_kernels.py --device cpu  # dry run

Each case is one TP rank's slice of a model's layer: llama3-8b (32 query heads, 8 KV heads,
head_dim 128) and qwen2.5-72b (64 and 8) at TP=1, 2 and 4, batch 1 and 16, a cache of 1088
positions with 1056 live (input 1024, mid-way through 64 decode steps). A graph calls the
kernel once per layer, over ``--layers`` caches of their own (more bytes than L2 holds,
as a step's layers are), and is replayed; the figure is microseconds per call, the median
of ``--rounds`` rounds that alternate the variants. The roofline is the cache bytes read
over the measured copy rate. Prints JSON lines; writes attention.jsonl and attention.md
under --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import copy_bw  # beside this script, as profile_decode.py imports it
import profile_decode
import torch
import torch.nn.functional as F

from gpulane.inference.fused_attention import fused_decode_attention, split_count
from gpulane.inference.model import rope_tables
from gpulane.inference.triton_attention import decode_attention_triton

MODELS = {"llama3-8b": (32, 8), "qwen2.5-72b": (64, 8)}  # query heads, KV heads
D = 128
# (block, num_warps, target programs): the fused kernel's launch shapes tried
SHAPES = [(64, 4, 264), (64, 2, 264), (32, 2, 264), (64, 2, 128), (64, 4, 128), (128, 4, 128),
          (64, 2, 528), (32, 4, 528)]  # fmt: skip


def graph_us(fn: Any, calls: int, replays: int = 20) -> float:
    """Microseconds per call of fn(i), i = 0..calls-1, all captured in one CUDA graph and
    replayed (profile_decode.py's graph_ms: warmed on a side stream first)."""
    return 1e3 * profile_decode.graph_ms(lambda: [fn(i) for i in range(calls)], replays) / calls


def cases(cuda: bool) -> list[dict[str, Any]]:
    out = []
    for model, (heads, kvh) in MODELS.items():
        for tp in (1, 2, 4):
            for batch in (1, 16):
                out.append({"model": model, "tp": tp, "batch": batch, "kv_heads": kvh // tp,
                            "group": heads // kvh, "clen": 1088 if cuda else 80,
                            "live": 1056 if cuda else 70})  # fmt: skip
    return out if cuda else out[:2] + out[-2:]


def attention_rows(c: dict[str, Any], args: Any, dev: torch.device, gbps: float) -> list[dict]:
    n, kvh, g, clen, live = c["batch"], c["kv_heads"], c["group"], c["clen"], c["live"]
    dt = torch.bfloat16 if dev.type == "cuda" else torch.float32
    layers = args.layers
    caches = [torch.randn(2, n, kvh, clen, D, device=dev, dtype=dt) for _ in range(layers)]
    qkv = torch.randn(n, (kvh * g + 2 * kvh) * D, device=dev, dtype=dt)
    q = qkv[:, : kvh * g * D].view(n, kvh, g, D)
    kn = qkv[:, kvh * g * D : kvh * (g + 1) * D].view(n, kvh, D)
    vn = qkv[:, kvh * (g + 1) * D :].view(n, kvh, D)
    cos_t, sin_t = rope_tables(10000.0, D, clen, dev, dt)
    cos, sin = cos_t[live - 1 : live], sin_t[live - 1 : live]
    lengths = torch.full((n,), live, device=dev, dtype=torch.int64)
    # name -> (fn(i), block, target programs): the pieces a call splits the cache into
    variants: dict[str, tuple[Any, int, int]] = {
        "triton": (lambda i: decode_attention_triton(q, caches[i][0], caches[i][1], lengths),
                   64, 264),
    }  # fmt: skip
    for block, warps, target in SHAPES:
        tag = f"b{block}w{warps}t{target}"
        knobs = {"block": block, "num_warps": warps, "target": target}
        variants[f"fused-attend:{tag}"] = (
            lambda i, kw=knobs: fused_decode_attention(q, caches[i][0], caches[i][1], lengths, **kw),
            block, target,
        )  # fmt: skip
        variants[f"fused:{tag}"] = (
            lambda i, kw=knobs: fused_decode_attention(
                q, caches[i][0], caches[i][1], lengths, kn, vn, cos, sin, **kw
            ),
            block, target,
        )  # fmt: skip
    variants["fused:rule"] = (  # the module's own choice of launch shape
        lambda i: fused_decode_attention(q, caches[i][0], caches[i][1], lengths, kn, vn, cos, sin),
        64, 264,
    )  # fmt: skip
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, (fn, _, _) in variants.items():
            times[name].append(graph_us(fn, layers, args.replays))
    # the cache a call reads: k and v of the live positions of every sequence and KV head
    cache_bytes = 2 * n * kvh * live * D * 2
    roof_us = cache_bytes / (gbps * 1e9) * 1e6 if gbps else 0.0
    rows = []
    for name, ts in times.items():
        variant, _, tag = name.partition(":")
        _, block, target = variants[name]
        rows.append({**c, "variant": variant, "launch": tag or "split+merge",
                     "us": round(statistics.median(ts), 2), "rounds_us": [round(t, 2) for t in ts],
                     "roofline_us": round(roof_us, 2),
                     "pieces": split_count(n, kvh, clen, block, target)})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def product_rows(args: Any, dev: torch.device) -> list[dict]:
    """o_proj and down of the 8B at TP=1, 1 and 16 rows: cuBLAS with reduced-precision
    split-K reductions allowed (torch's default) and not."""
    if dev.type != "cuda":
        return []
    rows = []
    matmul = torch.backends.cuda.matmul
    for name, k in (("o_proj", 4096), ("down", 14336)):
        ws = [torch.randn(4096, k, device=dev, dtype=torch.bfloat16) for _ in range(8)]
        for batch in (1, 16):
            x = torch.randn(batch, k, device=dev, dtype=torch.bfloat16)
            got: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.rounds):
                for allow in (True, False):
                    matmul.allow_bf16_reduced_precision_reduction = allow
                    got[allow].append(
                        graph_us(lambda i, x=x, ws=ws: F.linear(x, ws[i]), len(ws), args.replays)
                    )
            matmul.allow_bf16_reduced_precision_reduction = True
            for allow, ts in got.items():
                rows.append({"product": name, "batch": batch, "reduced_precision_reduction": allow,
                             "us": round(statistics.median(ts), 2),
                             "weight_mb": round(4096 * k * 2 / 1e6, 1)})  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
    return rows


def table(rows: list[dict], gbps: float) -> str:
    lines = [f"# decode attention kernels alone (us per call, CUDA-graph replays; copy rate "
             f"{gbps:.0f} GB/s; attention_kernels.py)", "",
             "| model | TP | batch | KV heads | roofline us | triton (2 kernels) | fused, attend only "
             "(best launch) | fused with rope + cache write (best launch) | fused, the launch rule "
             "| best / triton |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    keys = sorted({(r["model"], r["tp"], r["batch"]) for r in rows if "variant" in r})
    for model, tp, batch in keys:
        rs = [r for r in rows if r.get("model") == model and r["tp"] == tp and r["batch"] == batch]
        tri = next(r for r in rs if r["variant"] == "triton")
        att = min((r for r in rs if r["variant"] == "fused-attend"), key=lambda r: r["us"])
        fus = min((r for r in rs if r["variant"] == "fused"), key=lambda r: r["us"])
        rule = [r for r in rs if r["variant"] == "fused" and r["launch"] == "rule"]
        default = rule[0]["us"] if rule else "-"  # rows from before the rule have none
        ratio = fus["us"] / tri["us"] if tri["us"] else 0.0
        lines.append(f"| {model} | {tp} | {batch} | {tri['kv_heads']} | {tri['roofline_us']} | "
                     f"{tri['us']} | {att['us']} ({att['launch']}) | {fus['us']} ({fus['launch']}) "
                     f"| {default} | {ratio:.2f} |")  # fmt: skip
    prods = [r for r in rows if "product" in r]
    if prods:
        lines += ["", "# cuBLAS one-row products (us per call; 8 weight copies a graph)", "",
                  "| product | batch | weight MB | reduced-precision reduction allowed | us |",
                  "|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| {r['product']} | {r['batch']} | {r['weight_mb']} | "
                  f"{r['reduced_precision_reduction']} | {r['us']} |" for r in prods]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--layers", type=int, default=24, help="caches a graph cycles through")
    ap.add_argument("--replays", type=int, default=20, help="graph replays timed a round")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run (TRITON_INTERPRET=1)")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if not cuda:
        args.layers, args.rounds, args.replays = 2, 1, 1
    profile_decode.CUDA = cuda  # its graph_ms times on the host clock for a dry run
    gbps = (
        float(copy_bw.measure(dev, iters=10)["copy_gbps_read_plus_write_median"]) if cuda else 0.0
    )  # type: ignore[arg-type]
    rows: list[dict] = []
    with torch.inference_mode():
        for c in cases(cuda):
            rows += attention_rows(c, args, dev, gbps)
        rows += product_rows(args, dev)
    text = table(rows, gbps)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "attention.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (args.out / "attention.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
