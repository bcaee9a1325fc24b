"""Where a decode step's time goes: one GPU, TP=1, gpulane's own model code.

    python benchmarks/inference/profile_decode.py [--model llama3-8b] [--batch 1]
        [--input-len 512] [--steps 100] [--out DIR]

Prints one JSON object (and writes profile.json and kernels.txt under --out):
- ``step_ms``: a decode step replayed from a CUDA graph, as `gpulane tokens` times it;
- ``gemm_only_ms``: the same step's weight matrix products alone (every layer's QKV,
  o_proj, gate/up, down and the LM head on the same weights), also from a graph: what
  cuBLAS makes of the weight bytes, the floor for this code;
- ``roofline_ms``: the bytes a step moves (``gpulane.inference.roofline.step_cost``:
  weights without the embedding table, one embedding row per sequence, the KV cache read
  and written, activations) / device copy bandwidth (read + written bytes, torch);
  ``gemm_roofline_ms``: the matrix products' weight bytes / the same bandwidth;
- the kernels of one eagerly run step (torch.profiler): count, busy time, and the
  heaviest by name, grouped into matrix products, attention and the rest.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from gpulane.inference.memory import cache_len
from gpulane.inference.model import Comm, Init, Stage, StepInput
from gpulane.inference.roofline import step_cost
from gpulane.inference.shapes import shape_from_config
from gpulane.inference.sharding import rank_slices, stage_layers

CONF = Path(__file__).resolve().parents[2] / "gpulane" / "conf" / "model"


def copy_gbps(device: torch.device) -> float:
    from copy_bw import measure  # beside this script

    return float(measure(device, iters=10)["copy_gbps_read_plus_write_median"])  # type: ignore[arg-type]


def graph_ms(fn: Any, steps: int) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(steps):
        g.replay()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / steps


def group_of(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("gemm", "gemv", "cutlass", "sm90_xmma", "nvjet", "splitk")):
        return "matrix products"
    if any(k in n for k in ("fmha", "flash", "attention", "efficient")):
        return "attention"
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama3-8b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--layers", type=int, default=None, help="run only this many layers")
    ap.add_argument(
        "--attention",
        default="bmm,any,efficient",
        help="decode attention kernels to time the step with (the first is profiled)",
    )
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / f"{args.model}.yaml"))
    assert isinstance(cfg, dict)
    shape = shape_from_config({str(k): v for k, v in cfg.items()}).with_layers(args.layers)
    s = rank_slices(shape, 1, 0)
    clen = cache_len(args.input_len, args.steps + 8)
    comm = Comm(None, None, 1, True)
    with torch.inference_mode():
        t0 = time.perf_counter()
        stage = Stage(
            shape,
            s,
            stage_layers(shape.num_layers, 1)[0],
            True,
            True,
            comm,
            Init(dev, torch.bfloat16, 0),
            clen,
        )
        torch.cuda.synchronize()
        build_s = time.perf_counter() - t0
        weight_bytes = sum(
            t.numel() * t.element_size()
            for layer in stage.layers
            for t in (layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down)
        )
        assert stage.embed is not None and stage.lm_head is not None
        lm_head = stage.lm_head
        weight_bytes += stage.lm_head.numel() * 2 + stage.embed.shape[1] * 2 * args.batch
        b = args.batch
        stage.allocate_cache(b, clen)
        ids = torch.randint(0, shape.vocab_size, (b, args.input_len), device=dev)
        x, res = stage.forward(
            ids.reshape(-1), None, StepInput(rows=slice(0, b), seq_len=ids.shape[1])
        )
        tokens = torch.argmax(stage.logits(x, res, args.input_len), dim=-1)
        pos = torch.full((1,), args.input_len, dtype=torch.int64, device=dev)
        mask = torch.full((b, 1, 1, clen), float("-inf"), dtype=torch.bfloat16, device=dev)
        mask[..., : args.input_len] = 0

        chosen = ["bmm"]  # which decode attention step() uses

        def step() -> None:
            mask.index_fill_(3, pos, 0)
            st = StepInput(rows=slice(0, b), seq_len=1, pos=pos, mask=mask, attention=chosen[0])
            x, res = stage.forward(tokens, None, st)
            tokens.copy_(torch.argmax(stage.logits(x, res, 1), dim=-1))
            pos.add_(1)

        xs = torch.randn(b, shape.hidden_size, device=dev, dtype=torch.bfloat16)

        layer0 = stage.layers[0]
        x_o = torch.randn(b, layer0.w_o.shape[1], device=dev, dtype=torch.bfloat16)
        x_down = torch.randn(b, layer0.w_down.shape[1], device=dev, dtype=torch.bfloat16)

        def gemms() -> None:
            for layer in stage.layers:
                F.linear(xs, layer.w_qkv)
                F.linear(x_o, layer.w_o)
                F.linear(xs, layer.w_gate_up)
                F.linear(x_down, layer.w_down)
            F.linear(xs, lm_head)

        step_ms_by: dict[str, float] = {}
        for name in args.attention.split(","):
            chosen[0] = name
            step_ms_by[name] = round(graph_ms(step, args.steps), 3)
            pos.fill_(args.input_len)
            mask[..., args.input_len :] = float("-inf")
        first = args.attention.split(",")[0]
        chosen[0] = first
        step_ms = step_ms_by[first]
        gemm_ms = graph_ms(gemms, args.steps)
        # one eager step under the profiler: kernel names and durations
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        kernels: dict[str, list[float]] = {}
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time > 0:
                kernels.setdefault(ev.name, []).append(ev.device_time / 1e3)  # ms
    bw = copy_gbps(dev)
    # what the step must move (docs/roofline.md); the GEMMs alone against their weights
    cost = step_cost(shape, "decode", b, clen, 2)
    roof_ms = cost.bytes / bw / 1e6
    groups: dict[str, dict[str, float]] = {}
    for name, ts in kernels.items():
        g = groups.setdefault(group_of(name), {"count": 0, "ms": 0.0})
        g["count"] += len(ts)
        g["ms"] += sum(ts)
    top = sorted(kernels.items(), key=lambda kv: -sum(kv[1]))[:20]
    out = {
        "gpu": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "model": shape.name,
        "batch": b,
        "input_len": args.input_len,
        "build_s": round(build_s, 1),
        "weight_bytes": weight_bytes,
        "step_bytes": int(cost.bytes),
        "copy_gbps": round(bw, 1),
        "roofline_ms": round(roof_ms, 3),
        "gemm_roofline_ms": round(weight_bytes / bw / 1e6, 3),
        "attention": first,
        "step_ms": round(step_ms, 3),
        "step_ms_by_attention": step_ms_by,
        "gemm_only_ms": round(gemm_ms, 3),
        "ratio_step": round(step_ms / roof_ms, 3),
        "ratio_gemm_only": round(gemm_ms / (weight_bytes / bw / 1e6), 3),
        "eager_kernels": sum(len(t) for t in kernels.values()),
        "eager_kernel_ms": round(sum(sum(t) for t in kernels.values()), 3),
        "groups": {k: {"count": v["count"], "ms": round(v["ms"], 3)} for k, v in groups.items()},
        "top": [
            {
                "name": n[:120],
                "count": len(t),
                "ms": round(sum(t), 3),
                "us_each": round(1e3 * sum(t) / len(t), 2),
            }
            for n, t in top
        ],
    }
    print(json.dumps(out, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "profile.json").write_text(json.dumps(out, indent=1))
        (args.out / "kernels.txt").write_text(
            prof.key_averages().table(sort_by="cuda_time_total", row_limit=60)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
