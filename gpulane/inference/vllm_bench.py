"""`gpulane tokens engine=vllm`: vLLM's own benchmarks at the same shapes, rows in the
same table as gpulane's engine.

Where vLLM is installed, each (input_len, output_len, batch) of the run runs, on
``vllm.model_path`` (a model directory; with ``vllm.load_format=dummy`` only its
config.json and tokenizer are read and the weights are random, as in gpulane's own runs),
with ``--tensor-parallel-size`` tp and ``--pipeline-parallel-size`` pp:

1. ``vllm bench latency --batch-size B --input-len I --output-len 1``: one prefill of the
   batch and its first tokens: the time to first token (a ``prefill`` row);
2. ``vllm bench latency ... --output-len O``: the whole request; (this - the first) /
   (O - 1) is the mean inter-token latency of the decode (a ``decode`` row), as vLLM's
   own docs derive it;
3. ``vllm bench throughput --input-len I --output-len O --num-prompts 4B
   --max-num-seqs B``: B requests in flight at a time (a ``throughput`` row: output
   tokens/s, and vLLM's total).

The JSON each writes (``--output-json``) is imported (:mod:`gpulane.inference.vllm_import`)
and kept in the run directory with its printout. Rows carry ``backend`` vllm and
``extra.engine`` vllm, the model's name as gpulane knows it (``extra.model_path`` the
directory), so that ``gpulane compare`` and the tokens table put both engines side by side.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpulane.config.commands import TokensConfig
from gpulane.errors import InputError, MissingComponent, ParseError, RunFailed
from gpulane.inference.batching import configs
from gpulane.inference.vllm_import import Meta, read_vllm
from gpulane.record import Row, RowWriter
from gpulane.rundir import make_run_dir, run_env, save_config

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
PROMPTS_PER_SEQ = 4  # bench throughput: requests per slot, so that slots refill


def _base(cfg: TokensConfig, tp: int, pp: int) -> list[str]:
    exe = shutil.which("vllm")
    base = [exe] if exe else [sys.executable, "-m", "vllm.entrypoints.cli.main"]
    args = [
        "--model", str(cfg.vllm.model_path),
        "--tensor-parallel-size", str(tp),
        "--pipeline-parallel-size", str(pp),
        "--dtype", DTYPES.get(str(cfg.dtype), "auto"),
    ]  # fmt: skip
    if cfg.vllm.load_format:
        args += ["--load-format", str(cfg.vllm.load_format)]
    if not cfg.graph:
        args.append("--enforce-eager")
    return [*base, "bench", "{kind}", *args]


def vllm_commands(
    cfg: TokensConfig, tp: int, pp: int, batch: int, input_len: int, output_len: int, out: Path
) -> dict[str, list[str]]:
    """The three commands of one configuration, by name (prefill, latency, throughput),
    each writing ``out/vllm-NAME-b{batch}-i{input}-o{output}.json``."""
    tag = f"b{batch}-i{input_len}-o{output_len}"
    extra = [str(a) for a in cfg.vllm.extra_args or []]
    iters = ["--num-iters-warmup", str(max(1, int(cfg.warmup))),
             "--num-iters", str(max(1, int(cfg.iters)))]  # fmt: skip
    out_cmds: dict[str, list[str]] = {}
    for name, kind, length in (
        ("prefill", "latency", 1),
        ("latency", "latency", output_len),
        ("throughput", "throughput", output_len),
    ):
        cmd = [("latency" if kind == "latency" else "throughput") if a == "{kind}" else a
               for a in _base(cfg, tp, pp)]  # fmt: skip
        cmd += ["--input-len", str(input_len), "--output-len", str(length)]
        if kind == "latency":
            cmd += ["--batch-size", str(batch), *iters]
        else:
            cmd += ["--num-prompts", str(PROMPTS_PER_SEQ * batch), "--max-num-seqs", str(batch)]
        cmd += ["--output-json", str(out / f"vllm-{name}-{tag}.json"), *extra]
        out_cmds[name] = cmd
    return out_cmds


def latency_rows(prefill: Row, whole: Row, meta: Meta, extra: Mapping[str, Any]) -> list[Row]:
    """``prefill`` and ``decode`` rows (gpulane's fields) from bench latency at output 1
    (the prefill and first tokens) and at output O (the whole request)."""
    batch, input_len, output_len = meta.batch or 1, meta.input_len or 0, meta.output_len or 1
    assert prefill.time_us is not None and whole.time_us is not None
    ttft_s = prefill.time_us / 1e6
    common: dict[str, Any] = {
        "run_id": meta.run_id, "backend": "vllm", "build": meta.build,
        "model": meta.model, "tp": meta.tp, "pp": meta.pp, "batch": batch,
        "input_len": input_len, "output_len": output_len, "source": "measured",
        "world_size": (meta.tp or 1) * (meta.pp or 1), "nodes": 1,
    }  # fmt: skip
    rows = [
        Row.tokens(
            **common,
            op="prefill",
            iters=prefill.iters,
            time_us=prefill.time_us,
            time_us_p50=prefill.time_us_p50,
            time_us_p99=prefill.time_us_p99,
            tokens_per_s=batch * input_len / ttft_s,
            ttft_ms=ttft_s * 1e3,
            extra={
                **extra,
                "method": "vllm bench latency --output-len 1: prefill and first "
                "tokens of the batch",
                "vllm": prefill.extra,
            },
        )
    ]
    steps = max(1, output_len - 1)
    itl_s = (whole.time_us - prefill.time_us) / 1e6 / steps
    if output_len > 1 and itl_s > 0:
        p50 = _diff(whole.time_us_p50, prefill.time_us_p50, steps)
        p99 = _diff(whole.time_us_p99, prefill.time_us_p99, steps)
        rows.append(
            Row.tokens(
                **common,
                op="decode",
                iters=whole.iters,
                time_us=itl_s * 1e6,
                tokens_per_s=batch / itl_s,
                ttft_ms=ttft_s * 1e3,
                itl_ms_p50=None if p50 is None else p50 / 1e3,
                itl_ms_p99=None if p99 is None else p99 / 1e3,
                extra={
                    **extra,
                    "method": f"(vllm bench latency --output-len {output_len} "
                    f"- --output-len 1) / {steps}: mean inter-token latency",
                    "tokens_per_s_per_seq": 1 / itl_s,
                    "vllm": whole.extra,
                },
            )
        )
    return rows


def _diff(whole: float | None, first: float | None, steps: int) -> float | None:
    """Per-step difference of two latency percentiles (us), where both are known."""
    if whole is None or first is None:
        return None
    return (whole - first) / steps


def run_vllm(cfg: TokensConfig, say: Callable[[str], None]) -> int:
    """vLLM's own benchmarks on this machine as rows; ``say`` shows its lines."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None and shutil.which("vllm") is None:
        raise MissingComponent(
            "engine=vllm but vLLM is not installed here (pip install vllm); use engine=gpulane"
        )
    if not cfg.vllm.model_path:
        raise InputError(
            "engine=vllm needs vllm.model_path=DIR (a model directory with config.json)"
        )
    tp = 1 if str(cfg.tp) == "auto" else int(cfg.tp)
    pp = int(cfg.pp)
    name = str((cfg.model or {}).get("name") or Path(str(cfg.vllm.model_path)).name)
    env = run_env(cfg)
    run = make_run_dir(cfg)
    save_config(cfg, run, engine="vllm", tp=tp, pp=pp)
    status = 0
    rows: list[Row] = []
    with RowWriter(run.path) as writer:
        for input_len, output_len, batch in configs(cfg):
            cmds = vllm_commands(cfg, tp, pp, batch, input_len, output_len, run.path)
            meta = Meta(
                build=run.build,
                run_id=run.run_id,
                model=name,
                tp=tp,
                pp=pp,
                batch=batch,
                input_len=input_len,
                output_len=output_len,
            )
            got: dict[str, Row] = {}
            for what, cmd in cmds.items():
                say("# " + " ".join(cmd))
                log = run.path / f"vllm-{what}-b{batch}-i{input_len}-o{output_len}.log"
                with open(log, "w", encoding="utf-8") as fh:
                    done = subprocess.run(
                        cmd,
                        env={**os.environ, **env},
                        stdout=fh,
                        stderr=subprocess.STDOUT,
                        check=False,
                    )
                out = Path(cmd[cmd.index("--output-json") + 1])
                try:
                    found = [
                        r for r in read_vllm(out if out.exists() else log, meta) if r.status == "ok"
                    ]
                except (ParseError, OSError) as err:
                    found = []
                    sys.stderr.write(f"gpulane: error: {err}\n")
                if done.returncode != 0 or not found:
                    sys.stderr.write(
                        f"gpulane: error: vllm bench {cmd[cmd.index('bench') + 1]} exited "
                        f"{done.returncode}; its output: {log}\n"
                    )
                    status = RunFailed.exit_code
                    continue
                got[what] = found[0]
            extra = {"engine": "vllm", "model_path": str(cfg.vllm.model_path),
                     "load_format": cfg.vllm.load_format, "graph": bool(cfg.graph)}  # fmt: skip
            made: list[Row] = []
            if "prefill" in got and "latency" in got:
                made += latency_rows(got["prefill"], got["latency"], meta, extra)
            if "throughput" in got:
                thr = got["throughput"]
                thr.source, thr.model = "measured", name
                thr.extra = {**thr.extra, **extra, "command": " ".join(cmds["throughput"])}
                made.append(thr)
            for row in made:
                writer.write(row)
            rows += made
            dec = next((r for r in made if r.op == "decode"), None)
            if dec is not None and dec.tokens_per_s and dec.time_us and dec.ttft_ms:
                say(f"  batch {batch:>4}  in {input_len:>5}  out {output_len:>4}  decode "
                      f"{dec.tokens_per_s:.1f} tok/s  ITL {dec.time_us / 1e3:.2f} ms  TTFT "
                      f"{dec.ttft_ms:.1f} ms (vLLM)")  # fmt: skip
    run.finish()
    if rows:
        from rich.console import Console

        from gpulane.inference.table import results_table

        Console(width=None if sys.stdout.isatty() else 200).print(
            results_table([r for r in rows if r.op in ("prefill", "decode")])
        )
    say(f"# rows: {run.rows_path}")
    return status
