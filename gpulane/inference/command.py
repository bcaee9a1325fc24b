"""`gpulane tokens`: TP/PP decode and prefill token rates of a model's real shapes.

The front checks the shapes against tp and pp, estimates the memory per GPU against what
the GPU has (refusing with the largest batch or layer count that fits), starts tp x pp
ranks of :func:`gpulane.inference.runner.rank.run_rank` and prints the table of results.
"""

from __future__ import annotations

import sys
from typing import Any

from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from gpulane.collectives.command import local_gpus, path_label
from gpulane.errors import InputError, MissingComponent, RunFailed
from gpulane.hydra_app import comma_lists, run_hydra
from gpulane.inference.kernels import ATTENTION_BACKENDS
from gpulane.inference.memory import OVERHEAD_BYTES, GiB, cache_len, check_fits
from gpulane.inference.runner.plan import configs
from gpulane.inference.shapes import ModelShape, dtype_bytes, shape_from_config
from gpulane.inference.sharding import check_parallel
from gpulane.launch.local import launch_local
from gpulane.record import Row
from gpulane.runs import (
    RunDir,
    Terminated,
    make_run_dir,
    run_env,
    save_config,
    sigterm_as_exception,
)
from gpulane.units import format_size

JOB = "gpulane.inference.runner.rank:run_rank"
CPU_OVERHEAD = 1 << 29


LIST_KEYS = frozenset({"batch", "input_len", "output_len"})


def main(argv: list[str]) -> int:
    return run_hydra("tokens", tokens, comma_lists(argv, LIST_KEYS), "gpulane tokens")


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise InputError(f"{what}: expected a whole number, got {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected a whole number, got {value!r}") from None
    if n < 1 or str(value).strip() != str(n):
        raise InputError(f"{what}: expected a whole number >= 1, got {value!r}")
    return n


def resolve(cfg: Any) -> tuple[ModelShape, int, int, int, str]:
    """(shape as run, full layer count, tp, pp, device) from the configuration."""
    full = shape_from_config(dict(cfg.model))
    layers = cfg.get("layers")
    shape = full.with_layers(None if layers is None else _int(layers, "layers"))
    if shape.num_layers > full.num_layers:
        raise InputError(f"layers={shape.num_layers} but {full.name} has {full.num_layers}")
    pp = _int(cfg.pp, "pp")
    kernels = str(cfg.get("decode_attention") or "bmm")
    if kernels not in ATTENTION_BACKENDS:
        raise InputError(
            f"decode_attention: expected one of {', '.join(ATTENTION_BACKENDS)}, got {kernels!r}"
        )
    device = str(cfg.device).lower()
    if device not in ("auto", "cuda", "cpu"):
        raise InputError(f"device: expected auto, cuda or cpu, got {cfg.device!r}")
    gpus = local_gpus() if device != "cpu" else 0
    tp = (max(1, gpus // pp) if gpus else 1) if str(cfg.tp) == "auto" else _int(cfg.tp, "tp")
    world = tp * pp
    if device == "auto":
        device = "cuda" if gpus >= world else "cpu"
    if device == "cuda":
        if gpus == 0:
            raise MissingComponent("device=cuda but no GPU is visible; use device=cpu")
        if world > gpus:
            raise InputError(
                f"tp={tp} x pp={pp} needs {world} GPUs but this host has {gpus}; "
                "lower tp or pp, or use device=cpu"
            )
    check_parallel(shape, tp, pp)
    dtype_bytes(str(cfg.dtype))
    return shape, full.num_layers, tp, pp, device


def gpu_memory_bytes() -> int | None:
    """Total memory of GPU 0 from NVML (the front never creates a CUDA context)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def host_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_memory(
    cfg: Any, shape: ModelShape, full_layers: int, tp: int, pp: int, device: str
) -> str:
    """Raise when the largest configuration does not fit; a one-line summary otherwise."""
    runs = configs(cfg)
    dbytes = dtype_bytes(str(cfg.dtype))
    chunk = int(cfg.prefill_chunk_tokens)
    worst = max(runs, key=lambda r: (r[2] * cache_len(r[0], r[1]), r[2] * r[0]))
    frac = float(cfg.get("memory_fraction") or 0.92)
    if device == "cuda":
        total = gpu_memory_bytes()
        where, overhead = "the GPU", OVERHEAD_BYTES
        budget = int(total * frac) if total else None
    else:
        avail = host_memory_bytes()
        where, overhead = f"this host's free memory shared by {tp * pp} ranks", CPU_OVERHEAD
        budget = int(avail * frac / (tp * pp)) if avail else None
    if budget is None:
        return "memory per GPU: unknown (no NVML); the ranks check free memory themselves"
    est = check_fits(
        shape,
        full_layers,
        tp,
        pp,
        worst[2],
        worst[0],
        worst[1],
        dbytes,
        budget,
        where,
        chunk,
        overhead,
    )
    return f"memory per rank at batch {worst[2]}: {est.describe()} of {budget / GiB:.1f} GiB"


def tokens(cfg: DictConfig) -> int:
    engine = str(cfg.get("engine") or "gpulane")
    if engine == "vllm":
        from gpulane.inference.vllm_bench import run_vllm

        return run_vllm(cfg)
    if engine != "gpulane":
        raise InputError(f"engine: expected gpulane or vllm, got {engine!r}")
    shape, full_layers, tp, pp, device = resolve(cfg)
    configs(cfg)  # validates batch, input_len, output_len
    memory_line = check_memory(cfg, shape, full_layers, tp, pp, device)
    env = run_env(cfg)
    run = make_run_dir(cfg)
    world = tp * pp
    saved = save_config(
        cfg,
        run,
        shape=shape.to_dict(),
        full_layers=full_layers,
        tp=tp,
        pp=pp,
        world_size=world,
        device=device,
        path=path_label(device, world),
        nodes=1,
    )
    layers_note = (
        f", {shape.num_layers} of {full_layers} layers (figures also scaled to all)"
        if shape.num_layers != full_layers
        else ""
    )
    print(
        f"# gpulane tokens: {shape.name} tp={tp} pp={pp} on {world} {device} ranks{layers_note}, "
        f"build {run.build}, run {run.run_id}",
        flush=True,
    )
    print(f"# {memory_line}", flush=True)
    if env:
        print("# env: " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    seen: list[dict[str, Any]] = []
    from gpulane.collectives.table import RowTail

    tail = RowTail(run.rows_path)

    def poll() -> None:
        for row in tail.read():
            seen.append(row)
            if row.get("op") == "decode":
                console.print(progress_line(row))

    with sigterm_as_exception():
        try:
            result = launch_local(JOB, run.path, world, env, float(cfg.timeout_s), poll)
        except (KeyboardInterrupt, Terminated) as ex:
            poll()
            code = 143 if isinstance(ex, Terminated) else 130
            _error_row(saved, run, "interrupted" if code == 130 else "terminated (SIGTERM)")
            run.finish()
            return code
    poll()
    status = 0
    if result.user_error is not None:  # a rank refused the input (memory, shapes)
        code, message = result.user_error
        _error_row(saved, run, message)
        run.finish()
        sys.stderr.write(f"gpulane: error: {message}\n")
        return code
    if not result.ok:
        _error_row(saved, run, result.failure or "run failed")
        status = RunFailed.exit_code
    rows = [r for r in run.rows() if r.get("kind") == "tokens" and r.get("status") == "ok"]
    if rows:
        console.print(results_table(rows))
        if any(r.get("extra", {}).get("scaled_note") for r in rows):
            console.print(f"# {rows[0]['extra']['scaled_note']}")
    run.finish()
    print(f"# rows: {run.rows_path} (and rows.parquet)")
    if result.failure:
        sys.stderr.write(f"gpulane: error: {result.failure}\n")
    return status


def _error_row(cfg: Any, run: RunDir, message: str) -> None:
    run.write_error(
        Row(
            run_id=run.run_id,
            kind="tokens",
            backend="torch-nccl" if str(cfg.device) == "cuda" else "torch-gloo",
            op="run",
            build=run.build,
            world_size=int(cfg.world_size),
            model=str(cfg.shape.name),
            tp=int(cfg.tp),
            pp=int(cfg.pp),
            status="error",
            error=message,
        )
    )


def _fmt(value: Any, spec: str = ".1f") -> str:
    if value is None:
        return "-"
    try:
        return format(float(value), spec)
    except (TypeError, ValueError):
        return str(value)


def progress_line(row: dict[str, Any]) -> str:
    return (
        f"  batch {row['batch']:>4}  in {row['input_len']:>5}  out {row['output_len']:>4}  "
        f"decode {_fmt(row['tokens_per_s'])} tok/s  ITL p50 {_fmt(row['itl_ms_p50'], '.2f')} ms  "
        f"TTFT {_fmt(row['ttft_ms'], '.1f')} ms"
    )


def comm_text(calls: list[dict[str, Any]] | None) -> str:
    parts = []
    for c in calls or []:
        if c.get("op") == "all_reduce":
            parts.append(f"{c['count']}x{format_size(int(c['size_bytes']))}")
    return ", ".join(parts) or "-"


def results_table(rows: list[dict[str, Any]]) -> Table:
    """One line per configuration: prefill and decode side by side."""
    by_key: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in rows:
        key = (
            r.get("model"),
            r.get("tp"),
            r.get("pp"),
            r["batch"],
            r["input_len"],
            r["output_len"],
        )
        by_key.setdefault(key, {})[r["op"]] = r
    scaled = any(r.get("extra", {}).get("tokens_per_s_scaled") for r in rows)
    table = Table(title="tokens (prefill and decode)", show_lines=False)
    for name in ("model", "tp", "pp", "batch", "in", "out"):
        table.add_column(name, justify="right")
    table.add_column("prefill tok/s", justify="right")
    table.add_column("TTFT ms", justify="right")
    table.add_column("decode tok/s", justify="right")
    table.add_column("per seq", justify="right")
    table.add_column("ITL p50 ms", justify="right")
    table.add_column("ITL p99 ms", justify="right")
    table.add_column("comm % pre/dec", justify="right")
    table.add_column("all-reduce/step (decode)", justify="left")
    if scaled:
        table.add_column("decode tok/s (all layers)", justify="right")
    for key, ops in by_key.items():
        pre, dec = ops.get("prefill", {}), ops.get("decode", {})
        share = "/".join(
            "-" if r.get("comm_share") is None else f"{100 * float(r['comm_share']):.0f}"
            for r in (pre, dec)
        )
        dextra = dec.get("extra") or {}
        cells = [str(k) for k in key] + [
            _fmt(pre.get("tokens_per_s"), ".0f"),
            _fmt(pre.get("ttft_ms"), ".1f"),
            _fmt(dec.get("tokens_per_s"), ".1f"),
            _fmt(dextra.get("tokens_per_s_per_seq"), ".1f"),
            _fmt(dec.get("itl_ms_p50"), ".2f"),
            _fmt(dec.get("itl_ms_p99"), ".2f"),
            share,
            comm_text(dextra.get("comm_per_step")),
        ]
        if scaled:
            cells.append(_fmt(dextra.get("tokens_per_s_scaled"), ".1f"))
        table.add_row(*cells)
    return table
