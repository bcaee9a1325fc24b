"""Process groups: the world, tensor-parallel groups per stage, the pipeline's two
directions and the control group; the pipeline's sends and receives."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from gpulane.inference.runner.state import RunnerState


class ProcessGroups(RunnerState):
    # -- process groups ----------------------------------------------------------------
    def _init_dist(self) -> None:
        dist, ctx = self.dist, self.ctx
        kwargs: dict[str, Any] = {"timeout": timedelta(seconds=float(self.cfg.timeout_s))}
        if self.cuda:
            kwargs["device_id"] = self.device
        addr = ctx.info.master_addr or os.environ.get("MASTER_ADDR", "127.0.0.1")
        port = ctx.info.master_port or int(os.environ.get("MASTER_PORT", "29500"))
        dist.init_process_group(
            backend="nccl" if self.cuda else "gloo",
            rank=ctx.rank,
            world_size=ctx.world_size,
            init_method=f"tcp://{addr}:{port}",
            **kwargs,
        )
        self.tp_group = None
        for s in range(self.pp):
            ranks = [s * self.tp + r for r in range(self.tp)]
            group = dist.new_group(ranks=ranks) if self.tp > 1 and self.pp > 1 else None
            if s == self.stage:
                self.tp_group = group if self.pp > 1 else dist.group.WORLD
        self.fwd_group = dist.new_group() if self.pp > 1 else None
        self.back_group = dist.new_group() if self.pp > 1 else None
        self.control = dist.new_group(backend="gloo") if self.cuda else dist.group.WORLD

    def close(self) -> None:
        if self.dist.is_initialized():
            self.dist.destroy_process_group()

    # -- point to point ----------------------------------------------------------------
    def _send(self, tensor: Any, dst: int, group: Any) -> None:
        self.sends.append(self.dist.isend(tensor.contiguous(), dst, group=group))

    def _recv(self, tensor: Any, src: int, group: Any) -> None:
        self.dist.irecv(tensor, src, group=group).wait()

    def _settle_sends(self) -> None:
        """Wait for the sends made so far (the previous step's) before reusing buffers.

        On GPUs this only orders the compute stream after them; the host goes on."""
        for w in self.sends:
            w.wait()
        self.sends = []

    @property
    def next_rank(self) -> int:
        return self.ctx.rank + self.tp

    @property
    def prev_rank(self) -> int:
        return self.ctx.rank - self.tp

    @property
    def first_rank(self) -> int:  # same TP rank on stage 0
        return self.tp_rank

    @property
    def last_rank(self) -> int:
        return (self.pp - 1) * self.tp + self.tp_rank

    def _barrier(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
        self.dist.barrier(group=self.control)
