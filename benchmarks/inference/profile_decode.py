"""Where a decode step's (and a prefill's) time goes: one GPU, TP=1, gpulane's own model
code, eager against compiled, one process (the model is built once).

    python benchmarks/inference/profile_decode.py [--model llama3-8b] [--batch 1,16]
        [--input-len 512] [--steps 100] [--variants eager:bmm,compiled:bmm,compiled:triton]
        [--prefill 8192] [--compile-mode default] [--layers N] [--tp N] [--out DIR]

``--tp N``: TP rank 0's slices of a TP=N stage on this one GPU, its collectives no-ops (the
compute alone of `gpulane tokens comm_off=true`), its roofline the bytes of that slice: the
kernels a GPU of a TP=N step launches, without N GPUs. ``TORCHINDUCTOR_ENABLE_PDL=1`` in the
environment makes inductor's kernels use programmatic dependent launch (recorded as ``pdl``),
``TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1`` turns one-row products into tuned reductions
that take their elementwise neighbours (``cdt``).

A variant is ``eager|compiled:ATTENTION`` (``compile=`` and ``decode_attention=`` of
`gpulane tokens`). Prints one JSON object (and writes profile.json and kernels-*.txt
under --out):

- ``decode``: per batch and variant, ``step_ms`` (a decode step replayed from a CUDA graph,
  as `gpulane tokens` times it), ``compile_s`` (the first eager step's wall time when it
  compiled), ``roofline_ms`` (the bytes a step moves,
  ``gpulane.inference.roofline.step_cost``, over the device copy bandwidth) and
  ``ratio``; the kernels of one eagerly run step (torch.profiler): count, busy time,
  grouped into matrix products, attention and the rest, the heaviest by name;
- ``gemm_only_ms``: per batch, the step's weight matrix products alone from a graph
  (every layer's QKV, o_proj, gate/up, down and the LM head): the floor for this code;
- ``prefill``: per variant, one prefill of a ``--prefill``-token prompt replayed from a
  CUDA graph against the FLOP roofline (``step_cost`` FLOPs over the measured bf16
  matrix rate of an 8192^3 product), with its kernels grouped the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from gpulane.inference.fused import Fused
from gpulane.inference.kernels import TRITON_KERNELS
from gpulane.inference.memory import cache_len
from gpulane.inference.model import Comm, Init, Stage, StepInput
from gpulane.inference.roofline import step_cost
from gpulane.inference.shapes import shape_from_config
from gpulane.inference.sharding import rank_slices, stage_layers

CONF = Path(__file__).resolve().parents[2] / "gpulane" / "conf" / "model"


CUDA = True  # --device cpu: a dry run of this script's logic on a CPU (timings meaningless)


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def rates(device: torch.device) -> tuple[float, float]:
    if not CUDA:
        return 1.0, 1.0
    from copy_bw import matmul_tflops, measure  # beside this script

    bw = float(measure(device, iters=10)["copy_gbps_read_plus_write_median"])
    return bw, matmul_tflops(device)


def graph_ms(fn: Any, steps: int, before_each: Any = None) -> float:
    if not CUDA:  # dry run: eager calls on the host clock
        fn()
        if before_each is not None:
            before_each()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        return (time.perf_counter() - t0) * 1e3 / steps
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    if before_each is not None:
        before_each()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(steps):
        g.replay()
    e.record()
    torch.cuda.synchronize()
    del g
    return s.elapsed_time(e) / steps


def group_of(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("gemm", "gemv", "cutlass", "sm90_xmma", "nvjet", "splitk")):
        return "matrix products"
    if any(k in n for k in ("fmha", "flash", "attention", "efficient", "_split_kernel", "_merge_kernel", "_attend_kernel")):  # fmt: skip
        return "attention"
    return "other"


def kernels_of(fn: Any) -> tuple[dict[str, Any], Any]:
    """One eager run of fn under the profiler: kernel count, busy ms, groups, top 15."""
    sync()
    activity = torch.profiler.ProfilerActivity.CUDA if CUDA else torch.profiler.ProfilerActivity.CPU
    with torch.profiler.profile(activities=[activity]) as prof:
        fn()
        sync()
    kernels: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time > 0:
            kernels.setdefault(ev.name, []).append(ev.device_time / 1e3)  # ms
    groups: dict[str, dict[str, float]] = {}
    for name, ts in kernels.items():
        g = groups.setdefault(group_of(name), {"count": 0, "ms": 0.0})
        g["count"] += len(ts)
        g["ms"] += sum(ts)
    top = sorted(kernels.items(), key=lambda kv: -sum(kv[1]))[:15]
    return {
        "count": sum(len(t) for t in kernels.values()),
        "busy_ms": round(sum(sum(t) for t in kernels.values()), 3),
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
    }, prof


def decode_runs(
    stage: Stage, use: Any, b: int, args: Any, variants: list[list[str]], clen: int, bw: float,
    texts: dict[str, str],
) -> list[dict[str, Any]]:  # fmt: skip
    """Every variant's decode step at batch b, from one prefill's cache."""
    shape, dev = stage.shape, stage.cos.device
    stage.allocate_cache(b, clen)
    rows = slice(0, b)
    ids = torch.randint(0, shape.vocab_size, (b, args.input_len), device=dev)
    x, res = stage.forward(ids.reshape(-1), None, StepInput(rows, args.input_len))
    first = torch.argmax(stage.logits(x, res, args.input_len), dim=-1)
    tokens = first.clone()
    pos = torch.full((1,), args.input_len, dtype=torch.int64, device=dev)
    mask = torch.full((b, 1, 1, clen), float("-inf"), dtype=torch.bfloat16, device=dev)
    attention = ["bmm"]

    def reset() -> None:
        pos.fill_(args.input_len)
        mask.fill_(float("-inf"))
        mask[..., : args.input_len] = 0
        tokens.copy_(first)

    def step() -> None:
        mask.index_fill_(3, pos, 0)
        lengths = (pos + 1).expand(b) if attention[0] in TRITON_KERNELS else None
        st = StepInput(rows, 1, pos, mask, attention[0], lengths)
        x, res = stage.forward(tokens, None, st)
        tokens.copy_(torch.argmax(stage.logits(x, res, 1), dim=-1))
        pos.add_(1)

    roof_ms = step_cost(shape, "decode", b, clen, 2, tp=args.tp).memory_s(bw) * 1e3
    found = []
    for kind, att in variants:
        use(kind)
        attention[0] = att
        reset()
        try:
            t0 = time.perf_counter()
            step()  # compiles, where compiled, each shape once
            sync()
            first_s = time.perf_counter() - t0
            reset()
            ms = graph_ms(step, args.steps, reset)
            reset()
            prof, p = kernels_of(step)
        except Exception as err:  # one variant failing must not lose the others' figures
            found.append({"batch": b, "variant": f"{kind}:{att}", "error": repr(err)[:500]})
            print(json.dumps(found[-1]), flush=True)
            continue
        texts[f"decode-b{b}-{kind}-{att}"] = p.key_averages().table(
            sort_by="cuda_time_total", row_limit=40
        )
        found.append({
            "batch": b, "variant": f"{kind}:{att}", "compile": kind == "compiled",
            "attention": att, "step_ms": round(ms, 3), "first_step_s": round(first_s, 2),
            "roofline_ms": round(roof_ms, 3), "ratio": round(ms / roof_ms, 3), "kernels": prof,
        })  # fmt: skip
        print(json.dumps({k: v for k, v in found[-1].items() if k != "kernels"}), flush=True)
    use("eager")
    return found


def gemms_of(stage: Stage, b: int) -> Any:
    """The step's weight matrix products alone (every layer's and the LM head's)."""
    dev = stage.cos.device
    xs = torch.randn(b, stage.shape.hidden_size, device=dev, dtype=torch.bfloat16)
    layer0 = stage.layers[0]
    x_o = torch.randn(b, layer0.w_o.shape[1], device=dev, dtype=torch.bfloat16)
    x_down = torch.randn(b, layer0.w_down.shape[1], device=dev, dtype=torch.bfloat16)
    assert stage.lm_head is not None
    head = stage.lm_head

    def gemms() -> None:
        for layer in stage.layers:
            F.linear(xs, layer.w_qkv)
            F.linear(x_o, layer.w_o)
            F.linear(xs, layer.w_gate_up)
            F.linear(x_down, layer.w_down)
        F.linear(xs, head)

    return gemms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama3-8b")
    ap.add_argument("--batch", default="1", help="batch sizes, comma separated")
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--layers", type=int, default=None, help="run only this many layers")
    ap.add_argument("--variants", default="eager:bmm,compiled:bmm,compiled:triton")
    ap.add_argument("--compile-mode", default="default")
    ap.add_argument("--prefill", type=int, default=0, help="also time a prefill this long")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the logic (tiny models)")
    ap.add_argument("--tp", type=int, default=1, help="TP rank 0's slices of a TP=N stage")
    args = ap.parse_args()
    global CUDA
    CUDA = args.device == "cuda"
    dev = torch.device("cuda", 0) if CUDA else torch.device("cpu")
    if CUDA:
        torch.cuda.set_device(dev)
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / f"{args.model}.yaml"))
    assert isinstance(cfg, dict)
    shape = shape_from_config({str(k): v for k, v in cfg.items()}).with_layers(args.layers)
    batches = [int(b) for b in args.batch.split(",") if b]
    variants = [v.split(":") for v in args.variants.split(",") if v]
    clen = cache_len(args.input_len, args.steps + 8)
    max_pos = max(clen, args.prefill + 8)
    fused = {"eager": None, "compiled": Fused(True, args.compile_mode)}
    bw, tflops = rates(dev)
    out: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(dev) if CUDA else "cpu (dry run)",
        "torch": torch.__version__,
        "model": shape.name,
        "layers": shape.num_layers,
        "input_len": args.input_len,
        "context": clen,
        "copy_gbps": round(bw, 1),
        "matmul_tflops": round(tflops, 1),
        "compile_mode": args.compile_mode,
        "tp": args.tp,
        "pdl": os.environ.get("TORCHINDUCTOR_ENABLE_PDL") == "1",
        # inductor's coordinate descent tuning (its matrix-vector products: reductions)
        "cdt": os.environ.get("TORCHINDUCTOR_COORDINATE_DESCENT_TUNING") == "1",
        "decode": [],
        "gemm_only_ms": {},
        "prefill": [],
    }
    texts: dict[str, str] = {}
    try:
        with torch.inference_mode():
            t0 = time.perf_counter()
            comm = Comm(None, None, args.tp, True)
            comm.enabled = False  # compute alone: the collectives are no-ops
            stage = Stage(
                shape, rank_slices(shape, args.tp, 0), stage_layers(shape.num_layers, 1)[0], True,
                True, comm, Init(dev, torch.bfloat16, 0), max_pos,
            )  # fmt: skip
            sync()
            out["build_s"] = round(time.perf_counter() - t0, 1)

            def use(kind: str) -> None:
                for layer in stage.layers:
                    layer.fused = fused[kind]

            for b in batches:
                use("eager")
                out["decode"] += decode_runs(stage, use, b, args, variants, clen, bw, texts)
                out["gemm_only_ms"][str(b)] = round(graph_ms(gemms_of(stage, b), args.steps), 3)
                stage.free_cache()
                if CUDA:
                    torch.cuda.empty_cache()

            if args.prefill:
                n = args.prefill
                stage.allocate_cache(1, n + 8)
                ids = torch.randint(0, shape.vocab_size, (n,), device=dev)
                cost = step_cost(shape, "prefill", 1, n, 2, tp=args.tp)
                flop_ms = cost.compute_s(tflops) * 1e3

                def prefill() -> None:
                    x, res = stage.forward(ids, None, StepInput(slice(0, 1), n))
                    stage.logits(x, res, n)

                for kind in dict.fromkeys(k for k, _ in variants):
                    use(kind)
                    try:
                        t0 = time.perf_counter()
                        prefill()
                        sync()
                        first_s = time.perf_counter() - t0
                        ms = graph_ms(prefill, 5)
                        prof, p = kernels_of(prefill)
                    except Exception as err:  # keep the other variant's figures
                        out["prefill"].append(
                            {"input_len": n, "variant": kind, "error": repr(err)[:500]}
                        )
                        print(json.dumps(out["prefill"][-1]), flush=True)
                        continue
                    texts[f"prefill-{kind}"] = p.key_averages().table(
                        sort_by="cuda_time_total", row_limit=40
                    )
                    out["prefill"].append({
                        "input_len": n, "variant": kind, "compile": kind == "compiled",
                        "ttft_ms": round(ms, 3), "first_s": round(first_s, 2),
                        "flops": cost.flops, "flop_roofline_ms": round(flop_ms, 3),
                        "ratio": round(ms / flop_ms, 3), "kernels": prof,
                    })  # fmt: skip
                    print(
                        json.dumps({k: v for k, v in out["prefill"][-1].items() if k != "kernels"}),
                        flush=True,
                    )
                stage.free_cache()
    finally:  # what was measured is written even when a later part fails
        compiled = fused["compiled"]
        assert compiled is not None
        out["compile_s_total"] = round(compiled.compile_s, 1)
        out["compile_error"] = compiled.error
        print(json.dumps(out, indent=1))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "profile.json").write_text(json.dumps(out, indent=1))
            for name, text in texts.items():
                (args.out / f"kernels-{name}.txt").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
