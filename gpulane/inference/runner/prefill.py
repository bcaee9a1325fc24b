"""Prefill: the batch through every stage in chunks, timed to the first token at stage 0."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpulane.inference.runner.graphs import Graphs, Timer
from gpulane.inference.runner.groups import ProcessGroups


class Prefill(ProcessGroups, Graphs):
    # -- prefill -----------------------------------------------------------------------
    def prefill(self, ids: Any, chunks: list[slice], first_tokens: Any) -> Any | None:
        """One prefill of the batch; first tokens land in ``first_tokens`` on stage 0.

        Returns the last stage's logits [batch, vocab] (None elsewhere)."""
        from gpulane.inference.model import StepInput

        torch = self.torch
        h = self.shape.hidden_size
        seq = ids.shape[1]
        logits_out = []
        for rows in chunks:
            n = rows.stop - rows.start
            step = StepInput(rows=rows, seq_len=seq)
            if self.first:
                x, residual = self.model.forward(ids[rows].reshape(-1), None, step)
            else:
                x = torch.empty(n * seq, h, device=self.device, dtype=self.dtype)
                residual = torch.empty_like(x)
                self._recv(x, self.prev_rank, self.fwd_group)
                self._recv(residual, self.prev_rank, self.fwd_group)
                x, residual = self.model.forward(x, residual, step)
            if not self.last:
                assert residual is not None
                self._send(x, self.next_rank, self.fwd_group)
                self._send(residual, self.next_rank, self.fwd_group)
                continue
            logits = self.model.logits(x, residual, seq)
            tokens = torch.argmax(logits, dim=-1)
            logits_out.append(logits)
            if self.pp > 1:
                self._send(tokens, self.first_rank, self.back_group)
            else:
                first_tokens[rows] = tokens
        if self.first and self.pp > 1:
            for rows in chunks:
                self._recv(first_tokens[rows], self.last_rank, self.back_group)
        self._settle_sends()
        return torch.cat(logits_out) if logits_out else None

    def time_prefill(self, ids: Any, chunks: list[slice], first_tokens: Any) -> list[float]:
        cfg = self.cfg
        run: Callable[[], Any] = lambda: self.prefill(ids, chunks, first_tokens)  # noqa: E731
        for _ in range(int(cfg.warmup)):
            run()
        graph = None
        if self.prefill_graph:
            # the same prefill eagerly, once, before the graph: its time above the graph's
            # is what the host's launches cost (what a pipeline's eager prefill pays)
            self._barrier()
            eager = Timer(self.torch, self.cuda)
            eager.mark()
            host0 = time.perf_counter()
            run()
            host_s = time.perf_counter() - host0  # issued, not waited for
            eager.mark()
            if self.eager_prefill_s is None:  # the first timing of the configuration
                self.eager_prefill_s = eager.intervals_s()[0]
                self.eager_prefill_host_s = host_s
            # Eager prefills of one sequence can be host-bound: each tensor-parallel
            # all-reduce costs the host ~50 us, more than a short layer's kernels; a
            # compiled engine issues the prefill without those per-call costs.
            self.torch.cuda.empty_cache()  # the graph's pool must not sit beside eager's
            t0 = time.perf_counter()
            graph = self._capture(run)
            self.capture_s += time.perf_counter() - t0
            run = graph.replay
        self._barrier()
        timer = Timer(self.torch, self.cuda)
        issue_s = 0.0
        for _ in range(max(1, int(cfg.iters))):
            timer.mark()
            host0 = time.perf_counter()
            run()
            issue_s += time.perf_counter() - host0
            timer.mark()
        # this rank's host time to issue one prefill (a pipeline's stage 0: its chunks'
        # launches and sends), beside the GPU's time: whether the host set the pace
        self.prefill_host_s = issue_s / max(1, int(cfg.iters))
        times = timer.intervals_s()[::2]
        if graph is not None:
            del graph, run
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()
        return times
