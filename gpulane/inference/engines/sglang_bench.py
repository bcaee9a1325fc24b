"""SGLang behind the serving-engine interface: `python -m sglang.bench_one_batch` at each
(batch, input_len, output_len) of the run, with ``--tp-size`` tp, on ``sglang.model_path``
(``sglang.load_format=dummy``: only its config.json and tokenizer are read, the weights are
random, as in gpulane's own decoder). Its ``--result-filename`` JSON Lines are read by
:mod:`.sglang_import` into prefill and decode rows (backend and extra.engine ``sglang``),
beside its printout in the run directory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from gpulane.config.commands import TokensConfig
from gpulane.errors import InputError, ParseError, RunFailed
from gpulane.inference.batching import configs
from gpulane.inference.engines.base import installed_version
from gpulane.inference.engines.sglang_import import read_sglang
from gpulane.inference.vllm_import import Meta
from gpulane.record import Row, RowWriter
from gpulane.rundir import make_run_dir, run_env, save_config

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def sglang_command(
    cfg: TokensConfig, tp: int, batch: int, input_len: int, output_len: int, result: Path
) -> list[str]:
    """The one-batch benchmark's command line for one configuration."""
    cmd = [
        sys.executable, "-m", "sglang.bench_one_batch",
        "--model-path", str(cfg.sglang.model_path),
        "--tp-size", str(tp),
        "--batch-size", str(batch),
        "--input-len", str(input_len),
        "--output-len", str(output_len),
        "--dtype", DTYPES.get(str(cfg.dtype), "auto"),
        "--run-name", "gpulane",
        "--result-filename", str(result),
    ]  # fmt: skip
    if cfg.sglang.load_format:
        cmd += ["--load-format", str(cfg.sglang.load_format)]
    if not cfg.graph:
        cmd.append("--disable-cuda-graph")
    return cmd + [str(a) for a in cfg.sglang.extra_args]


class SglangEngine:
    name = "sglang"
    install_hint = "pip install 'sglang[all]' (or engine=gpulane for gpulane's own decoder)"

    def installed(self) -> str | None:
        return installed_version("sglang")

    def model_path(self, cfg: TokensConfig) -> str | None:
        return str(cfg.sglang.model_path) if cfg.sglang.model_path else None

    def rows(self, path: Path, meta: Meta) -> Iterator[Row]:
        return read_sglang(path, meta)

    def run(self, cfg: TokensConfig, say: Callable[[str], None]) -> int:
        if int(cfg.pp) != 1:
            raise InputError("engine=sglang: bench_one_batch runs tensor parallelism only; pp=1")
        tp = 1 if str(cfg.tp) == "auto" else int(cfg.tp)
        model = cfg.model if isinstance(cfg.model, Mapping) else {}
        name = str(model.get("name") or Path(str(cfg.sglang.model_path)).name)
        env = {**os.environ, **run_env(cfg)}
        run = make_run_dir(cfg)
        save_config(cfg, run, engine=self.name, tp=tp, pp=1)
        status, made = 0, 0
        extra = {"engine": self.name, "engine_version": self.installed(),
                 "model_path": str(cfg.sglang.model_path)}  # fmt: skip
        with RowWriter(run.path) as writer:
            for input_len, output_len, batch in configs(cfg):
                tag = f"b{batch}-i{input_len}-o{output_len}"
                result, log = run.path / f"sglang-{tag}.jsonl", run.path / f"sglang-{tag}.log"
                cmd = sglang_command(cfg, tp, batch, input_len, output_len, result)
                say("# " + " ".join(cmd))
                with open(log, "w", encoding="utf-8") as fh:
                    done = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
                meta = Meta(build=run.build, run_id=run.run_id, model=name, tp=tp, pp=1,
                            batch=batch, input_len=input_len, output_len=output_len,
                            extra=extra)  # fmt: skip
                try:
                    rows = list(read_sglang(result if result.exists() else log, meta))
                except (ParseError, OSError) as err:
                    rows = []
                    sys.stderr.write(f"gpulane: error: {err}\n")
                if done.returncode != 0 or not rows:
                    sys.stderr.write(
                        f"gpulane: error: sglang.bench_one_batch exited {done.returncode}; "
                        f"its output: {log}\n"
                    )
                    status = RunFailed.exit_code
                    continue
                for row in rows:
                    row.source = "measured"
                    writer.write(row)
                    made += 1
                dec = next((r for r in rows if r.op == "decode"), None)
                if dec is not None and dec.time_us:
                    say(f"  batch {batch:>4}  in {input_len:>5}  out {output_len:>4}  decode "
                        f"{dec.tokens_per_s or 0:.1f} tok/s  step {dec.time_us / 1e3:.2f} ms "
                        "(SGLang)")  # fmt: skip
        run.finish()
        say(f"# rows: {run.rows_path}")
        return status if made else RunFailed.exit_code
