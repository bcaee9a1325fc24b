"""`gpulane sweep`: collectives over message sizes with nccl-tests' numbers, on any backend
and launcher; with launcher.pattern=per-node|pairs|halving, a cluster campaign."""

from __future__ import annotations

from gpulane.commands.hydra_app import comma_lists, run_hydra
from gpulane.config.capabilities import backend_of, launcher_of
from gpulane.config.commands import SweepConfig

# Keys that take several values in one run: `collectives=all_reduce,all_gather` means the
# list (outside -m, where Hydra reads a comma list as a sweep).
LIST_KEYS = frozenset({"collectives", "dtype"})


def sweep(cfg: SweepConfig) -> int:
    if launcher_of(cfg).remote_world and not backend_of(cfg).runs_program:
        from gpulane.launch.slurm.settings import settings

        s = settings(cfg)
        from gpulane.session.backend_choice import choose_backend
        from gpulane.session.sweep import slurm_device

        cfg, line = choose_backend(cfg, slurm_device(cfg, s.gpus_per_node))
        if line:
            print(line, flush=True)  # before any session header: campaigns have none
        if s.pattern != "allocation":
            from gpulane.campaigns.run import run_campaign

            return run_campaign(cfg, s)
        from gpulane.session.packing import packing, queue_packed

        if s.pack and packing():
            return queue_packed(cfg, s)
    from gpulane.session.sweep import run_sweep

    return run_sweep(cfg)


def main(argv: list[str]) -> int:
    return run_hydra("sweep", sweep, comma_lists(argv, LIST_KEYS), "gpulane sweep")
