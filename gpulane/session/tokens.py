"""A token-rate run as a session: the shapes, tp x pp and memory checked before any rank
starts, then tp x pp ranks of the decoder on this host, a line per decode configuration
and the table at the end. A serving engine (``engine=vllm``, ``sglang``, or one ``auto``
finds installed with its model given: gpulane.inference.engines.registry) runs its own
benchmark instead."""

from __future__ import annotations

from typing import Any

from gpulane.config.commands import TokensConfig
from gpulane.config.validate import check_preset
from gpulane.inference.batching import configs
from gpulane.inference.engines.registry import ENGINES, HOME, choose
from gpulane.inference.plan import check_memory, resolve
from gpulane.inference.table import TokensView
from gpulane.launch.base import LaunchSpec
from gpulane.launch.registry import host_launcher
from gpulane.rundir import make_run_dir, rank_env, run_env, save_config
from gpulane.session.output import stdout
from gpulane.session.run import RunSession, SessionSpec
from gpulane.session.world import local_gpus, local_path_label

JOB = "gpulane.inference.runner.rank:run_rank"


def run_tokens(cfg: TokensConfig) -> int:
    launcher = host_launcher(cfg, "token runs", "cuda")
    shape, full_layers, tp, pp, device = resolve(cfg, local_gpus())
    choice = choose(cfg, device)
    if choice.engine != HOME:
        stdout(f"# {choice.why}")
        return ENGINES[choice.engine].run(cfg, stdout)
    check_preset(cfg, device)
    runs = configs(cfg)  # validates batch, input_len, output_len
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
        path=local_path_label(device, world),
        nodes=1,
    )
    layers_note = (
        f", {shape.num_layers} of {full_layers} layers (figures also scaled to all)"
        if shape.num_layers != full_layers
        else ""
    )
    spec = SessionSpec(
        command="tokens",
        kind="tokens",
        backend="torch-nccl" if device == "cuda" else "torch-gloo",
        description=f"{shape.name} tp={tp} pp={pp} on {world} {device} ranks{layers_note}",
        world_size=world,
        row_fields=_row_fields(saved),
        header=[f"# {choice.why}", f"# {memory_line}"],
    )
    session = RunSession(run, spec, TokensView(len(runs)), env, progress=bool(cfg.progress))
    ranks_env = rank_env(run.path, env, device == "cuda")
    launch = LaunchSpec(
        run.path, world, ranks_env, float(cfg.timeout_s), job=JOB, run_id=run.run_id
    )
    return session.run_launch(launcher, launch)


def _row_fields(cfg: TokensConfig) -> dict[str, Any]:
    return {"model": str((cfg.shape or {})["name"]), "tp": int(cfg.tp), "pp": int(cfg.pp)}
