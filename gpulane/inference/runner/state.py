"""What every part of the rank job reads: one annotated home for the runner's attributes,
set by :class:`gpulane.inference.runner.rank.Runner`."""

from __future__ import annotations

from typing import Any

from gpulane.config.commands import TokensConfig
from gpulane.inference.shapes import ModelShape
from gpulane.rank import RankContext


class RunnerState:
    torch: Any
    dist: Any
    cfg: TokensConfig
    ctx: RankContext
    shape: ModelShape
    full_layers: int
    tp: int
    pp: int
    stage: int
    tp_rank: int
    first: bool  # stage 0
    last: bool  # the last stage
    cuda: bool
    device: Any
    dtype: Any  # torch dtype of weights and activations
    dbytes: int
    graph: bool  # decode steps as CUDA-graph replays
    fused: Any  # fused.Fused: the compiled path, or None (eager)
    capture_s: float  # CUDA-graph capture time of the configuration's prefill
    # one eager prefill of the configuration before its graph is captured (pp=1), so that
    # the advisor sees the host's launch floor that pipeline prefills (eager) pay
    eager_prefill_s: float | None
    # the host's time to issue that eager prefill (its clock around the call, no
    # synchronize): what a pipeline stage's host pays per pass, seen even where the GPU's
    # work hides it in the eager time
    eager_prefill_host_s: float | None
    prefill_host_s: float | None  # the host's time to issue a timed prefill (mean)
    backend: str
    comm: Any  # model.Comm: the tensor-parallel collectives
    model: Any  # model.Stage
    runs: list[tuple[int, int, int]]
    sends: list[Any]  # pipeline sends not yet waited for
    graphs: list[Any]
    tp_group: Any
    fwd_group: Any
    back_group: Any
    control: Any
    build_s: float

    @property
    def prefill_graph(self) -> bool:
        """Whether prefills are timed as CUDA-graph replays: on GPUs, without pipeline
        stages (their sends and receives stay eager), unless prefill_graph=false."""
        return self.graph and self.pp == 1 and bool(self.cfg.prefill_graph)
