"""The rank job: build this rank's stage, then prefill, decode and write rows for every
configuration (:func:`run_rank`, what the launchers start)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from gpulane.config.commands import TokensConfig
from gpulane.errors import InputError, MissingComponent
from gpulane.inference.batching import configs, micro_batch_count, prefill_chunks, split_rows
from gpulane.inference.memory import cache_len, check_fits, held_by_others
from gpulane.inference.runner.decode import Decode
from gpulane.inference.runner.prefill import Prefill
from gpulane.inference.runner.rows import RowBuilder
from gpulane.inference.shapes import DTYPE_NAMES, ModelShape, dtype_bytes
from gpulane.inference.sharding import rank_slices, stage_layers
from gpulane.rank import RankContext
from gpulane.record import Row, own_rows_writer
from gpulane.topology.nccl_logs import NcclLogs


class Runner(Prefill, Decode, RowBuilder):
    def __init__(self, cfg: TokensConfig, ctx: RankContext) -> None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError as err:
            raise MissingComponent(
                "torch is not installed; install it with `pip install 'gpulane[torch]'`"
            ) from err
        self.started = time.time()
        self.torch: Any = torch
        self.dist: Any = dist
        self.cfg, self.ctx = cfg, ctx
        from gpulane.inference.model import Comm, Init, Stage
        from gpulane.inference.shapes import shape_from_config

        self.shape: ModelShape = shape_from_config(cfg.shape or {})
        self.full_layers = int(cfg.full_layers or self.shape.num_layers)
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
        self.fused = self._fused()
        self.compiled_shapes: set[tuple[Any, ...]] = set()
        self.said_compile_error = False
        self.capture_s = 0.0
        self.eager_prefill_s = None
        self.eager_prefill_host_s = None
        self.prefill_host_s = None
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
        init = Init(self.device, self.dtype, int(cfg.seed or 0))
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
                fused=self.fused,
            )
        if self.cuda:
            torch.cuda.synchronize()
        self.build_s = time.perf_counter() - t0
        self.sends: list[Any] = []
        self.graphs: list[Any] = []

    def _fused(self) -> Any:
        """The compiled path (compile=auto: on GPUs, falling back to eager on a compiler
        failure; true: anywhere, failing loudly), or None for the eager model."""
        from gpulane.inference.plan import compile_choice

        choice = compile_choice(self.cfg.compile)
        if not (self.cuda if choice is None else choice):
            return None
        from gpulane.inference.fused import Fused

        return Fused(True, str(self.cfg.compile_mode), strict=choice is True)

    def _compiling(self, key: tuple[Any, ...], label: str) -> None:
        """Say so (the progress line shows it) before the first run of a new shape."""
        if self.fused is None or not self.fused.compiled or key in self.compiled_shapes:
            return
        self.compiled_shapes.add(key)
        self.ctx.note(f"# compiling… {label} (torch.compile, once per shape)")

    def _compile_s(self) -> float:
        """Seconds spent compiling so far; says once when compiling failed and the run
        went on eagerly (compile=auto)."""
        fused = self.fused
        if fused is None:
            return 0.0
        if fused.error and not self.said_compile_error:
            self.said_compile_error = True
            self.ctx.note(f"# torch.compile failed, running eagerly: {fused.error}")
        return float(fused.compile_s)

    # -- memory ------------------------------------------------------------------------
    def _check_memory(self) -> None:
        torch = self.torch
        if not self.cuda or self.tp_rank != 0:
            return
        free, total = torch.cuda.mem_get_info(self.device)
        budget = int(free * float(self.cfg.memory_fraction or 0.92))
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
            others=held_by_others(self.ctx.run_dir, self.device, free, total),
        )

    # -- one configuration ----------------------------------------------------------------
    def run_config(self, index: int, input_len: int, output_len: int, batch: int) -> dict[str, Any]:
        torch, cfg = self.torch, self.cfg
        label = f"b{batch} in{input_len} out{output_len}"
        clen = cache_len(input_len, output_len)
        self.model.allocate_cache(batch, clen)
        gen = torch.Generator().manual_seed(int(cfg.seed or 0) + index)
        ids = torch.randint(0, self.shape.vocab_size, (batch, input_len), generator=gen)
        ids = ids.to(self.device)
        first_tokens = torch.zeros(batch, dtype=torch.int64, device=self.device)
        m = micro_batch_count(cfg, self.pp, batch)
        chunks = prefill_chunks(batch, input_len, int(cfg.prefill_chunk_tokens), m)
        out: dict[str, Any] = {"micro_batches": m, "prefill_chunks": len(chunks)}

        self.ctx.heartbeat(4 * index + 1, f"prefill {label}")
        sizes = tuple(c.stop - c.start for c in chunks)
        self._compiling(("prefill", sizes, input_len), f"prefill {label}")
        compile0, self.capture_s, self.eager_prefill_s = self._compile_s(), 0.0, None
        self.eager_prefill_host_s = None
        self.comm.log = []
        self.prefill(ids, chunks[:1], first_tokens)
        out["prefill_calls_seen"] = _summarize_log(self.comm.log)
        self.comm.log = None
        out["prefill_s"] = self.time_prefill(ids, chunks, first_tokens)
        out["prefill_compile_s"] = self._compile_s() - compile0
        out["prefill_capture_s"] = self.capture_s
        out["prefill_eager_s"] = self.eager_prefill_s
        out["prefill_eager_host_s"] = self.eager_prefill_host_s
        out["prefill_host_s"] = self.prefill_host_s
        if cfg.profile:
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
        self._compiling(("decode", tuple(st["n"] for st in states), clen), f"decode {label}")
        compile0 = self._compile_s()
        self.comm.log = []
        self.step_fn(states[0], keep_logits=False)()  # one eager step, to count its calls
        out["decode_calls_seen"] = _summarize_log(self.comm.log)
        self.comm.log = None
        self.reset_state(states, input_len, first_tokens)
        t0 = time.perf_counter()
        steps = self.capture(states)
        out["decode_capture_s"] = time.perf_counter() - t0 if self.graph else 0.0
        out["decode_compile_s"] = self._compile_s() - compile0
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
        if cfg.dump_logits and self.last and self.tp_rank == 0:
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

    def run_all(self, on_row: Callable[[Row], None] | None = None) -> None:
        writer = own_rows_writer(self.ctx.run_dir) if self.ctx.is_leader else None
        # What NCCL connected between the stages and within them, from its init lines.
        nccl = NcclLogs(self.ctx.run_dir, since=self.started) if writer and self.cuda else None
        try:
            with self.torch.inference_mode():
                for index, (i, o, b) in enumerate(self.runs):
                    res = self.run_config(index, i, o, b)
                    if writer is not None:
                        for row in with_transport(self.rows(i, o, b, res), nccl, self.ctx):
                            writer.write(row)
                            if on_row is not None:
                                on_row(row)
        finally:
            if writer is not None:
                writer.close()
        self.ctx.heartbeat(4 * len(self.runs) + 1, "done")


def with_transport(rows: list[Row], nccl: NcclLogs | None, ctx: RankContext) -> list[Row]:
    """The rows with NCCL's transport (``transport``, ``extra.nccl``) once its lines are read."""
    if nccl is None or not rows:
        return rows
    found, note = nccl.for_row(rows[0].path)
    if note:
        ctx.note(note)
    if found:
        for row in rows:
            row.transport = found.get("transport")
            row.extra["nccl"] = found
    return rows


def _summarize_log(log: list[tuple[str, int]] | None) -> list[dict[str, Any]]:
    out: dict[tuple[str, int], int] = {}
    for op, size in log or []:
        out[(op, size)] = out.get((op, size), 0) + 1
    return [{"op": op, "count": n, "size_bytes": size} for (op, size), n in sorted(out.items())]


def run_rank(
    cfg: TokensConfig, ctx: RankContext, on_row: Callable[[Row], None] | None = None
) -> None:
    runner = Runner(cfg, ctx)
    try:
        runner.run_all(on_row)
    finally:
        runner.close()
