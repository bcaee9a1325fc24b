"""The per-rank token job: build the stage, prefill, decode, time it, and (rank 0) write rows.

Ranks are laid out stage-major: rank = stage * tp + tp_rank. Every rank runs the same
configurations in the same order. For each (input_len, output_len, batch):

1. prefill the batch (in chunks of whole sequences of at most ``prefill_chunk_tokens``,
   and in at least ``micro_batches`` chunks when pp > 1 so that stages overlap), timed
   from the first token id in to the last first-token out at stage 0: time to first token;
2. the same with the TP collectives turned into no-ops (``comm_off``): compute alone;
3. decode ``output_len - 1`` steps from the prompt, one CUDA graph per micro-batch and
   stage on GPUs (``graph``), eagerly on CPUs; each step's time is taken at stage 0 when
   the step's last tokens are back (CUDA events on GPUs, perf_counter on CPUs);
4. the decode again with no-op collectives.

Pipeline sends go stage to stage over one process group and the sampled tokens go back
from the last stage to the first over another, so the two directions never queue behind
each other. Sends are not waited for at once (the compute stream goes on); a stage waits
for a send of the previous step before it reuses the buffer.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from gpulane import __version__
from gpulane.errors import InputError, MissingComponent
from gpulane.inference.memory import GiB, cache_len, check_fits
from gpulane.inference.shapes import DTYPE_NAMES, ModelShape, dtype_bytes
from gpulane.inference.sharding import (
    decode_comm,
    max_rank_params,
    prefill_comm,
    rank_slices,
    stage_layers,
)
from gpulane.rank import RankContext
from gpulane.record import Row, RowWriter

ENV_PREFIXES = ("NCCL_", "TORCH_NCCL", "CUDA_VISIBLE_DEVICES", "GLOO_")


def as_list(value: Any, what: str) -> list[int]:
    """``[1, 8]``, ``8`` or ``"1,8"`` as a list of whole numbers >= 1."""
    if isinstance(value, str):
        parts: list[Any] = [p for p in value.replace(" ", "").split(",") if p]
    elif isinstance(value, (list, tuple)) or hasattr(value, "__iter__"):
        parts = list(value)
    else:
        parts = [value]
    out = []
    for p in parts:
        try:
            n = int(p)
        except (TypeError, ValueError):
            raise InputError(f"{what}: expected whole numbers, got {value!r}") from None
        if isinstance(p, bool) or n < 1 or str(p).strip() not in (str(n), f"{n}.0"):
            raise InputError(f"{what}: expected whole numbers >= 1, got {value!r}")
        out.append(n)
    if not out:
        raise InputError(f"{what}: expected at least one value")
    return out


def configs(cfg: Any) -> list[tuple[int, int, int]]:
    """(input_len, output_len, batch) in run order."""
    return list(
        itertools.product(
            as_list(cfg.input_len, "input_len"),
            as_list(cfg.output_len, "output_len"),
            as_list(cfg.batch, "batch"),
        )
    )


def micro_batch_count(cfg: Any, pp: int, batch: int) -> int:
    m = cfg.get("micro_batches", "auto")
    n = pp if str(m) == "auto" else int(m)
    return max(1, min(n, batch))


def split_rows(batch: int, parts: int) -> list[slice]:
    base, extra = divmod(batch, parts)
    out, start = [], 0
    for j in range(parts):
        n = base + (1 if j < extra else 0)
        out.append(slice(start, start + n))
        start += n
    return [r for r in out if r.stop > r.start]


def prefill_chunks(batch: int, input_len: int, chunk_tokens: int, min_chunks: int) -> list[slice]:
    per = max(1, chunk_tokens // max(input_len, 1))
    parts = max(min_chunks, -(-batch // per))
    return split_rows(batch, min(parts, batch))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass
class Timer:
    """Marks on the device (CUDA events) or the host clock, read after a synchronize."""

    torch: Any
    cuda: bool
    marks: list[Any] = field(default_factory=list)

    def mark(self) -> None:
        if self.cuda:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append(ev)
        else:
            self.marks.append(time.perf_counter())

    def intervals_s(self) -> list[float]:
        if self.cuda:
            self.torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(self.marks)]
        return [b - a for a, b in itertools.pairwise(self.marks)]


class Runner:
    def __init__(self, cfg: Any, ctx: RankContext) -> None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError as err:
            raise MissingComponent(
                "torch is not installed; install it with `pip install 'gpulane[torch]'`"
            ) from err
        self.torch: Any = torch
        self.dist: Any = dist
        self.cfg, self.ctx = cfg, ctx
        from gpulane.inference.model import Comm, Init, Stage
        from gpulane.inference.shapes import shape_from_config

        self.shape: ModelShape = shape_from_config(cfg.shape)
        self.full_layers = int(cfg.get("full_layers") or self.shape.num_layers)
        self.tp, self.pp = int(cfg.tp), int(cfg.pp)
        if self.tp * self.pp != ctx.world_size:
            raise InputError(
                f"tp={self.tp} x pp={self.pp} needs {self.tp * self.pp} ranks, "
                f"started with {ctx.world_size}"
            )
        self.stage, self.tp_rank = divmod(ctx.rank, self.tp)
        self.first, self.last = self.stage == 0, self.stage == self.pp - 1
        self.cuda = str(cfg.device) == "cuda"
        if self.cuda:
            if not torch.cuda.is_available():
                raise MissingComponent("device=cuda but torch sees no GPU; use device=cpu")
            torch.cuda.set_device(ctx.local_rank)
            self.device = torch.device("cuda", ctx.local_rank)
        else:
            self.device = torch.device("cpu")
            torch.set_num_threads(max(1, (os.cpu_count() or 2) // max(1, ctx.world_size)))
        self.dtype = getattr(torch, DTYPE_NAMES[str(cfg.dtype).lower()])
        self.dbytes = dtype_bytes(str(cfg.dtype))
        self.graph = bool(cfg.graph) and self.cuda
        self.backend = "torch-nccl" if self.cuda else "torch-gloo"
        self._init_dist()
        self.comm = Comm(dist, self.tp_group, self.tp, self.cuda)
        self.slices = rank_slices(self.shape, self.tp, self.tp_rank)
        self.layer_range = stage_layers(self.shape.num_layers, self.pp)[self.stage]
        self.runs = configs(cfg)
        self.max_positions = max(cache_len(i, o) for i, o, _ in self.runs)
        self._check_memory()
        ctx.heartbeat(0, "building the model")
        t0 = time.perf_counter()
        init = Init(self.device, self.dtype, int(cfg.get("seed") or 0))
        with torch.inference_mode():
            self.model = Stage(
                self.shape,
                self.slices,
                self.layer_range,
                self.first,
                self.last,
                self.comm,
                init,
                self.max_positions,
            )
        if self.cuda:
            torch.cuda.synchronize()
        self.build_s = time.perf_counter() - t0
        self.sends: list[Any] = []
        self.graphs: list[Any] = []

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

    # -- memory ------------------------------------------------------------------------
    def _check_memory(self) -> None:
        torch = self.torch
        if not self.cuda or self.tp_rank != 0:
            return
        free, _total = torch.cuda.mem_get_info(self.device)
        budget = int(free * float(self.cfg.get("memory_fraction") or 0.92))
        worst = max(self.runs, key=lambda r: (r[2] * cache_len(r[0], r[1]), r[2] * r[0]))
        check_fits(
            self.shape,
            self.full_layers,
            self.tp,
            self.pp,
            worst[2],
            worst[0],
            worst[1],
            self.dbytes,
            budget,
            f"GPU {self.ctx.local_rank} (free now)",
            int(self.cfg.prefill_chunk_tokens),
        )

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

    @property
    def prefill_graph(self) -> bool:
        """Whether prefills are timed as CUDA-graph replays: on GPUs, without pipeline
        stages (their sends and receives stay eager), unless prefill_graph=false."""
        return self.graph and self.pp == 1 and bool(self.cfg.get("prefill_graph", True))

    def time_prefill(self, ids: Any, chunks: list[slice], first_tokens: Any) -> list[float]:
        cfg = self.cfg
        run: Callable[[], Any] = lambda: self.prefill(ids, chunks, first_tokens)  # noqa: E731
        for _ in range(int(cfg.warmup)):
            run()
        graph = None
        if self.prefill_graph:
            # Eager prefills of one sequence can be host-bound: each tensor-parallel
            # all-reduce costs the host ~50 us, more than a short layer's kernels; a
            # compiled engine issues the prefill without those per-call costs.
            self.torch.cuda.empty_cache()  # the graph's pool must not sit beside eager's
            graph = self._capture(run)
            run = graph.replay
        self._barrier()
        timer = Timer(self.torch, self.cuda)
        for _ in range(max(1, int(cfg.iters))):
            timer.mark()
            run()
            timer.mark()
        times = timer.intervals_s()[::2]
        if graph is not None:
            del graph, run
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()
        return times

    def _capture(self, fn: Callable[[], Any], pool: Any = None, warm: int = 1) -> Any:
        """fn captured in a CUDA graph, after ``warm`` runs on a side stream (as capture
        wants: allocator, cuBLAS and NCCL set up outside the capture)."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warm):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            fn()
        torch.cuda.synchronize()
        return g

    def _barrier(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
        self.dist.barrier(group=self.control)

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
        kernels = str(self.cfg.get("decode_attention") or "bmm")

        def run() -> None:
            st["mask"].index_fill_(3, st["pos"], 0)
            step = StepInput(
                rows=st["rows"], seq_len=1, pos=st["pos"], mask=st["mask"], attention=kernels
            )
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
        fns = [self.step_fn(st, keep_logits=bool(self.cfg.get("dump_logits"))) for st in states]
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

    # -- one configuration ----------------------------------------------------------------
    def run_config(self, index: int, input_len: int, output_len: int, batch: int) -> dict[str, Any]:
        torch, cfg = self.torch, self.cfg
        label = f"b{batch} in{input_len} out{output_len}"
        clen = cache_len(input_len, output_len)
        self.model.allocate_cache(batch, clen)
        gen = torch.Generator().manual_seed(int(cfg.get("seed") or 0) + index)
        ids = torch.randint(0, self.shape.vocab_size, (batch, input_len), generator=gen)
        ids = ids.to(self.device)
        first_tokens = torch.zeros(batch, dtype=torch.int64, device=self.device)
        m = micro_batch_count(cfg, self.pp, batch)
        chunks = prefill_chunks(batch, input_len, int(cfg.prefill_chunk_tokens), m)
        out: dict[str, Any] = {"micro_batches": m, "prefill_chunks": len(chunks)}

        self.ctx.heartbeat(4 * index + 1, f"prefill {label}")
        self.comm.log = []
        self.prefill(ids, chunks[:1], first_tokens)
        out["prefill_calls_seen"] = _summarize_log(self.comm.log)
        self.comm.log = None
        out["prefill_s"] = self.time_prefill(ids, chunks, first_tokens)
        if cfg.get("profile"):
            self.profile(
                f"prefill-b{batch}-i{input_len}", lambda: self.prefill(ids, chunks, first_tokens)
            )
        if cfg.comm_off and self.tp > 1:
            self.comm.enabled = False
            out["prefill_off_s"] = self.time_prefill(ids, chunks, first_tokens)
            self.comm.enabled = True
        logits = self.prefill(ids, chunks, first_tokens)  # the cache and first tokens, for real
        dump: dict[str, Any] = {"prefill": logits.cpu() if logits is not None else None}

        n_steps = max(1, output_len - 1)
        self.ctx.heartbeat(4 * index + 2, f"decode {label}")
        parts = split_rows(batch, m)
        states = self.decode_state(batch, input_len, clen, parts, first_tokens)
        self.comm.log = []
        self.step_fn(states[0], keep_logits=False)()  # one eager step, to count its calls
        out["decode_calls_seen"] = _summarize_log(self.comm.log)
        self.comm.log = None
        self.reset_state(states, input_len, first_tokens)
        steps = self.capture(states)
        self.reset_state(states, input_len, first_tokens)
        out["decode_s"], dumped = self.decode(states, steps, n_steps)
        dump["decode"] = [(t, j, lg.cpu()) for t, j, lg in dumped]
        self.graphs = []
        if cfg.comm_off and self.tp > 1:
            self.ctx.heartbeat(4 * index + 3, f"decode without collectives {label}")
            self.comm.enabled = False
            self.reset_state(states, input_len, first_tokens)
            steps = self.capture(states)
            self.reset_state(states, input_len, first_tokens)
            out["decode_off_s"], _ = self.decode(states, steps, n_steps)
            self.comm.enabled = True
            self.graphs = []
        if cfg.get("dump_logits") and self.last and self.tp_rank == 0:
            torch.save(dump, self.ctx.run_dir / f"logits-b{batch}-i{input_len}-o{output_len}.pt")
        del states, steps
        self.model.free_cache()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        return out

    def profile(self, label: str, fn: Callable[[], Any]) -> None:
        """One more run of ``fn`` under torch.profiler (CPU and CUDA), written as a Chrome
        trace per rank into the run directory: where a step's time goes, rank by rank."""
        torch = self.torch
        acts = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        self._barrier()
        with torch.profiler.profile(activities=acts) as prof:
            fn()
            if self.cuda:
                torch.cuda.synchronize()
        prof.export_chrome_trace(str(self.ctx.run_dir / f"trace-{label}-rank{self.ctx.rank}.json"))

    # -- rows --------------------------------------------------------------------------
    def rows(self, input_len: int, output_len: int, batch: int, res: dict[str, Any]) -> list[Row]:
        cfg, shape = self.cfg, self.shape
        m = res["micro_batches"]
        per_mb = -(-batch // m)
        chunk = -(-batch // res["prefill_chunks"])
        decode_calls = [
            c.to_dict() for c in decode_comm(shape, self.tp, self.pp, per_mb, self.dbytes)
        ]
        prefill_calls = [
            c.to_dict()
            for c in prefill_comm(shape, self.tp, self.pp, chunk, input_len, self.dbytes)
        ]
        full_params = max_rank_params(shape.with_layers(self.full_layers), self.tp, self.pp)
        run_params = max_rank_params(shape, self.tp, self.pp)
        scale = full_params / run_params if self.full_layers != shape.num_layers else None
        common: dict[str, Any] = {
            "run_id": str(cfg.run_id),
            "kind": "tokens",
            "backend": self.backend,
            "build": str(cfg.build),
            "host": self.ctx.host,
            "nodes": 1,
            "world_size": self.ctx.world_size,
            "dtype": DTYPE_NAMES[str(cfg.dtype).lower()],
            "model": shape.name,
            "tp": self.tp,
            "pp": self.pp,
            "batch": batch,
            "input_len": input_len,
            "output_len": output_len,
            "layers": shape.num_layers,
            "path": cfg.get("path"),
            "source": "measured",
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
            "versions": self.versions(),
        }
        base_extra: dict[str, Any] = {
            "engine": "gpulane",
            "layers_total": self.full_layers,
            "micro_batches": m,
            "weights_gib_per_gpu": round(run_params * self.dbytes / GiB, 3),
            "build_s": round(self.build_s, 2),
            "decode_attention": str(cfg.get("decode_attention") or "bmm"),
            "launcher": self.ctx.info.launcher,
        }
        if scale is not None:
            base_extra["scaled_note"] = (
                f"ran {shape.num_layers} of {self.full_layers} layers; *_scaled figures are "
                f"the measured ones times {scale:.3f} (full/run parameters per GPU)"
            )
        # prefill
        pre = res["prefill_s"]
        ttft = statistics.fmean(pre)
        pre_extra = {
            **base_extra,
            "comm_per_step": prefill_calls,
            "prefill_chunks": res["prefill_chunks"],
            "comm_seen_rank0": res.get("prefill_calls_seen"),
        }
        share = self._comm_share(res.get("prefill_off_s"), ttft, pre_extra)
        if scale is not None:
            pre_extra["ttft_ms_scaled"] = ttft * 1e3 * scale
            pre_extra["tokens_per_s_scaled"] = batch * input_len / (ttft * scale)
        prefill = Row(
            **common,
            op="prefill",
            graph=self.prefill_graph,
            iters=len(pre),
            time_us=ttft * 1e6,
            time_us_p50=percentile(pre, 0.5) * 1e6,
            time_us_p99=percentile(pre, 0.99) * 1e6,
            tokens_per_s=batch * input_len / ttft,
            ttft_ms=ttft * 1e3,
            comm_share=share,
            extra=pre_extra,
        )
        # decode
        dec = res["decode_s"]
        mean = statistics.fmean(dec)
        dec_extra = {
            **base_extra,
            "comm_per_step": decode_calls,
            "comm_seen_rank0": res.get("decode_calls_seen"),
            "tokens_per_s_per_seq": 1.0 / mean,
            "steps": len(dec),
        }
        share = self._comm_share(res.get("decode_off_s"), mean, dec_extra)
        if scale is not None:
            dec_extra["itl_ms_scaled"] = mean * 1e3 * scale
            dec_extra["tokens_per_s_scaled"] = batch / (mean * scale)
        decode = Row(
            **common,
            op="decode",
            graph=self.graph,
            iters=len(dec),
            time_us=mean * 1e6,
            time_us_p50=percentile(dec, 0.5) * 1e6,
            time_us_p99=percentile(dec, 0.99) * 1e6,
            tokens_per_s=batch / mean,
            ttft_ms=ttft * 1e3,
            itl_ms_p50=percentile(dec, 0.5) * 1e3,
            itl_ms_p99=percentile(dec, 0.99) * 1e3,
            comm_share=share,
            extra=dec_extra,
        )
        return [prefill, decode]

    def _comm_share(
        self, off_s: list[float] | None, mean_s: float, extra: dict[str, Any]
    ) -> float | None:
        """1 - (time with no-op collectives) / time, noting the compute-only time in
        ``extra``; 0 at tp=1 (nothing to share), None when not measured."""
        if off_s:
            off = statistics.fmean(off_s)
            extra["compute_only_ms"] = off * 1e3
            return max(0.0, 1.0 - off / mean_s)
        return 0.0 if self.tp == 1 else None

    def versions(self) -> dict[str, str]:
        torch = self.torch
        v = {"gpulane": __version__, "torch": str(torch.__version__)}
        if self.cuda:
            with contextlib.suppress(Exception):
                v["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version()[:3])
            v["cuda"] = str(torch.version.cuda)
            v["gpu"] = torch.cuda.get_device_name(self.device)
        return v

    def run_all(self, on_row: Callable[[Row], None] | None = None) -> None:
        writer = RowWriter(self.ctx.run_dir) if self.ctx.is_leader else None
        try:
            with self.torch.inference_mode():
                for index, (i, o, b) in enumerate(self.runs):
                    res = self.run_config(index, i, o, b)
                    if writer is not None:
                        for row in self.rows(i, o, b, res):
                            writer.write(row)
                            if on_row is not None:
                                on_row(row)
        finally:
            if writer is not None:
                writer.close()
        self.ctx.heartbeat(4 * len(self.runs) + 1, "done")


def _summarize_log(log: list[tuple[str, int]] | None) -> list[dict[str, Any]]:
    out: dict[tuple[str, int], int] = {}
    for op, size in log or []:
        out[(op, size)] = out.get((op, size), 0) + 1
    return [{"op": op, "count": n, "size_bytes": size} for (op, size), n in sorted(out.items())]


def run_rank(cfg: Any, ctx: RankContext, on_row: Callable[[Row], None] | None = None) -> None:
    runner = Runner(cfg, ctx)
    try:
        runner.run_all(on_row)
    finally:
        runner.close()
