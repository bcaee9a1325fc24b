"""Decode: static buffers per micro-batch, one step as a CUDA graph (or eagerly), and the
steps run through the pipeline, timed at stage 0."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpulane.inference.kernels import TRITON_KERNELS
from gpulane.inference.runner.graphs import Graphs, Timer
from gpulane.inference.runner.groups import ProcessGroups


class Decode(ProcessGroups, Graphs):
    # -- decode ------------------------------------------------------------------------
    def decode_state(
        self, batch: int, input_len: int, clen: int, parts: list[slice], first_tokens: Any
    ) -> list[dict[str, Any]]:
        """Static buffers of each micro-batch: inputs, outputs, position and mask."""
        torch = self.torch
        h = self.shape.hidden_size
        states = []
        for rows in parts:
            n = rows.stop - rows.start
            st: dict[str, Any] = {"rows": rows, "n": n}
            st["pos"] = torch.full((1,), input_len, dtype=torch.int64, device=self.device)
            st["mask"] = torch.zeros(n, 1, 1, clen, dtype=self.dtype, device=self.device)
            if self.first:
                st["ids"] = first_tokens[rows].clone()
            else:
                st["x_in"] = torch.zeros(n, h, device=self.device, dtype=self.dtype)
                st["r_in"] = torch.zeros(n, h, device=self.device, dtype=self.dtype)
            if self.last:
                st["tokens"] = torch.zeros(n, dtype=torch.int64, device=self.device)
                st["logits"] = None
            else:
                st["x_out"] = torch.zeros(n, h, device=self.device, dtype=self.dtype)
                st["r_out"] = torch.zeros(n, h, device=self.device, dtype=self.dtype)
            states.append(st)
        self.reset_state(states, input_len, first_tokens)
        return states

    def reset_state(self, states: list[dict[str, Any]], input_len: int, first_tokens: Any) -> None:
        for st in states:
            st["pos"].fill_(input_len)
            st["mask"].fill_(float("-inf"))
            st["mask"][..., :input_len] = 0
            if self.first:
                st["ids"].copy_(first_tokens[st["rows"]])

    def step_fn(self, st: dict[str, Any], keep_logits: bool) -> Callable[[], None]:
        """One decode step of one micro-batch on this stage, on static buffers only."""
        from gpulane.inference.model import StepInput

        torch = self.torch
        model = self.model
        kernels = str(self.cfg.decode_attention or "bmm")

        def run() -> None:
            st["mask"].index_fill_(3, st["pos"], 0)
            # every sequence of a batch is at the same position: pos + 1 live positions
            lengths = (st["pos"] + 1).expand(st["n"]) if kernels in TRITON_KERNELS else None
            step = StepInput(
                rows=st["rows"], seq_len=1, pos=st["pos"], mask=st["mask"], attention=kernels,
                lengths=lengths,
            )  # fmt: skip
            if self.first:
                x, residual = model.forward(st["ids"], None, step)
            else:
                x, residual = model.forward(st["x_in"], st["r_in"], step)
            if self.last:
                logits = model.logits(x, residual, 1)
                st["tokens"].copy_(torch.argmax(logits, dim=-1))
                if keep_logits:
                    st["logits"] = logits.clone()
                if self.pp == 1:
                    st["ids"].copy_(st["tokens"])
            else:
                assert residual is not None
                st["x_out"].copy_(x)
                st["r_out"].copy_(residual)
            st["pos"].add_(1)

        return run

    def capture(self, states: list[dict[str, Any]]) -> list[Callable[[], None]]:
        """The decode step of each micro-batch, as a CUDA graph replay where enabled.

        Capturing runs the step a few times; the caller resets the state afterwards."""
        torch = self.torch
        fns = [self.step_fn(st, keep_logits=bool(self.cfg.dump_logits)) for st in states]
        if not self.graph:
            return fns
        pool = torch.cuda.graph_pool_handle()
        self.graphs = [self._capture(fn, pool, warm=2) for fn in fns]
        return [g.replay for g in self.graphs]

    def decode(
        self, states: list[dict[str, Any]], steps: list[Callable[[], None]], n_steps: int
    ) -> tuple[list[float], list[Any]]:
        """``n_steps`` decode steps of every micro-batch; per-step times at stage 0 and,
        on the last stage with dump_logits, the logits of each step."""
        dumped: list[Any] = []
        timer = Timer(self.torch, self.cuda)
        self._barrier()
        timer.mark()
        m = len(states)
        for t in range(n_steps):
            self._settle_sends()
            for j, (st, run) in enumerate(zip(states, steps, strict=True)):
                if self.first and self.pp > 1 and t > 0:
                    self._recv(st["ids"], self.last_rank, self.back_group)
                    if j == m - 1:
                        timer.mark()  # step t-1 is complete at stage 0
                if not self.first:
                    self._recv(st["x_in"], self.prev_rank, self.fwd_group)
                    self._recv(st["r_in"], self.prev_rank, self.fwd_group)
                run()
                if self.last:
                    if st.get("logits") is not None:
                        dumped.append((t, j, st["logits"].clone()))
                    if self.pp > 1:
                        self._send(st["tokens"], self.first_rank, self.back_group)
                else:
                    self._send(st["x_out"], self.next_rank, self.fwd_group)
                    self._send(st["r_out"], self.next_rank, self.fwd_group)
            if self.pp == 1:
                timer.mark()
        if self.first and self.pp > 1:
            for st in states:
                self._recv(st["ids"], self.last_rank, self.back_group)
            timer.mark()
        self._settle_sends()
        times = timer.intervals_s() if self.first else []
        return times, dumped
