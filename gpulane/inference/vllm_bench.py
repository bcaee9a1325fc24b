"""`gpulane tokens engine=vllm`: vLLM's own `vllm bench latency` at the same shapes.

Where vLLM is installed, each (input_len, output_len, batch) runs `vllm bench latency`
on ``vllm.model_path`` (a model directory; with ``vllm.load_format=dummy`` only its
config.json and tokenizer are read and the weights are random, as in gpulane's own runs),
with ``--tensor-parallel-size`` tp and ``--pipeline-parallel-size`` pp; the JSON it writes
is imported into the run directory as ``tokens`` rows.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from gpulane.config.commands import TokensConfig
from gpulane.errors import InputError, MissingComponent, RunFailed
from gpulane.inference.batching import configs
from gpulane.inference.vllm_import import Meta, read_vllm
from gpulane.record import RowWriter
from gpulane.rundir import make_run_dir, run_env, save_config


def vllm_command(
    cfg: TokensConfig, tp: int, pp: int, batch: int, input_len: int, output_len: int, out: str
) -> list[str]:
    exe = shutil.which("vllm")
    base = [exe] if exe else [sys.executable, "-m", "vllm.entrypoints.cli.main"]
    cmd = [
        *base,
        "bench",
        "latency",
        "--model",
        str(cfg.vllm.model_path),
        "--tensor-parallel-size",
        str(tp),
        "--pipeline-parallel-size",
        str(pp),
        "--batch-size",
        str(batch),
        "--input-len",
        str(input_len),
        "--output-len",
        str(output_len),
        "--num-iters-warmup",
        str(max(1, int(cfg.warmup))),
        "--num-iters",
        str(max(1, int(cfg.iters))),
        "--output-json",
        out,
    ]
    if cfg.vllm.load_format:
        cmd += ["--load-format", str(cfg.vllm.load_format)]
    dtype = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(str(cfg.dtype), "auto")
    cmd += ["--dtype", dtype]
    if not cfg.graph:
        cmd.append("--enforce-eager")
    cmd += [str(a) for a in cfg.vllm.extra_args or []]
    return cmd


def run_vllm(cfg: TokensConfig) -> int:
    import importlib.util

    if importlib.util.find_spec("vllm") is None and shutil.which("vllm") is None:
        raise MissingComponent("engine=vllm but vLLM is not installed here; use engine=gpulane")
    if not cfg.vllm.model_path:
        raise InputError(
            "engine=vllm needs vllm.model_path=DIR (a model directory with config.json)"
        )
    tp = 1 if str(cfg.tp) == "auto" else int(cfg.tp)
    pp = int(cfg.pp)
    env = run_env(cfg)
    run = make_run_dir(cfg)
    save_config(cfg, run, engine="vllm", tp=tp, pp=pp)
    import os

    status = 0
    with RowWriter(run.path) as writer:
        for input_len, output_len, batch in configs(cfg):
            out = str(run.path / f"vllm-latency-b{batch}-i{input_len}-o{output_len}.json")
            cmd = vllm_command(cfg, tp, pp, batch, input_len, output_len, out)
            print("# " + " ".join(cmd), flush=True)
            done = subprocess.run(cmd, env={**os.environ, **env}, check=False)
            if done.returncode != 0:
                sys.stderr.write(f"gpulane: error: vllm bench latency exited {done.returncode}\n")
                status = RunFailed.exit_code
                continue
            meta = Meta(
                build=run.build,
                run_id=run.run_id,
                model=str(cfg.vllm.model_path),
                tp=tp,
                pp=pp,
                batch=batch,
                input_len=input_len,
                output_len=output_len,
                extra={"engine": "vllm", "command": " ".join(cmd)},
            )
            for row in read_vllm(out, meta):
                row.source = "measured"
                writer.write(row)
                print(
                    f"  batch {batch} in {input_len} out {output_len}: {row.time_us / 1e3 if row.time_us else 0:.1f} ms per request batch"
                )
    run.finish()
    print(f"# rows: {run.rows_path}")
    return status
