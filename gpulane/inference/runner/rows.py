"""The two result rows of one configuration (prefill and decode), from its timings."""

from __future__ import annotations

import contextlib
import statistics
from typing import Any

from gpulane import __version__
from gpulane.inference.memory import GiB, cache_len
from gpulane.inference.roofline import step_cost
from gpulane.inference.runner.state import RunnerState
from gpulane.inference.shapes import DTYPE_NAMES
from gpulane.inference.sharding import decode_comm, max_rank_params, prefill_comm
from gpulane.record import Row, shaping_env


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class RowBuilder(RunnerState):
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
            "path": cfg.path,
            "source": "measured",
            "env": shaping_env(),
            "versions": self.versions(),
        }
        base_extra: dict[str, Any] = {
            "layers_total": self.full_layers,
            "micro_batches": m,
            "weights_gib_per_gpu": round(run_params * self.dbytes / GiB, 3),
            "build_s": round(self.build_s, 2),
            "launcher": self.ctx.info.launcher,
            # the shape as run (layers cut or not): what the advisor's calibration reads
            "shape": shape.to_dict(),
            **self.kernels(),
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
            "roofline": self.roofline("prefill", chunk, input_len),
            "comm_per_step": prefill_calls,
            "prefill_chunks": res["prefill_chunks"],
            "comm_seen_rank0": res.get("prefill_calls_seen"),
            "compile_s": round(res.get("prefill_compile_s", 0.0), 2),
            "capture_s": round(res.get("prefill_capture_s", 0.0), 3),
        }
        if res.get("prefill_eager_s") is not None:  # graph prefills: one eager beside
            pre_extra["eager_ms"] = res["prefill_eager_s"] * 1e3
        if res.get("prefill_eager_host_s") is not None:  # the host's issue time of it
            pre_extra["eager_host_ms"] = res["prefill_eager_host_s"] * 1e3
        if res.get("prefill_host_s") is not None:  # rank 0's issue time of a timed one
            pre_extra["host_ms"] = res["prefill_host_s"] * 1e3
        share = self._comm_share(res.get("prefill_off_s"), ttft, pre_extra)
        if scale is not None:
            pre_extra["ttft_ms_scaled"] = ttft * 1e3 * scale
            pre_extra["tokens_per_s_scaled"] = batch * input_len / (ttft * scale)
        prefill = Row.tokens(
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
            "roofline": self.roofline("decode", per_mb, cache_len(input_len, output_len)),
            "comm_per_step": decode_calls,
            "comm_seen_rank0": res.get("decode_calls_seen"),
            "tokens_per_s_per_seq": 1.0 / mean,
            "steps": len(dec),
            "compile_s": round(res.get("decode_compile_s", 0.0), 2),
            "capture_s": round(res.get("decode_capture_s", 0.0), 3),
        }
        share = self._comm_share(res.get("decode_off_s"), mean, dec_extra)
        if scale is not None:
            dec_extra["itl_ms_scaled"] = mean * 1e3 * scale
            dec_extra["tokens_per_s_scaled"] = batch / (mean * scale)
        decode = Row.tokens(
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

    def kernels(self) -> dict[str, Any]:
        """Which kernels the rows were measured with: the engine, whether the layer's
        elementwise chains were compiled and which it fused, the attention kernels."""
        fused = self.fused
        out: dict[str, Any] = {"engine": "gpulane"}
        if fused is not None:
            out.update(fused.describe())
        else:
            out.update({"compile": False, "compile_mode": None, "fused_ops": []})
        out["decode_attention"] = str(self.cfg.decode_attention or "bmm")
        out["prefill_attention"] = "sdpa causal (torch's choice)"
        return out

    def roofline(self, op: str, seqs: int, context: int) -> dict[str, Any]:
        """What one step moves and computes on the busiest rank (stage 0, which takes the
        extra layer of an uneven split): ``gpulane.inference.roofline.step_cost``, the
        function advise and the benchmarks use (docs/roofline.md). A decode step of a
        micro-batch reads the whole static cache (``context`` = its length); a prefill
        chunk runs ``seqs`` prompts of ``context`` tokens."""
        cost = step_cost(self.shape, op, seqs, context, self.dbytes, self.tp, self.pp, 0)
        return {**cost.to_dict(), "seqs": seqs, "context": context, "stage": 0}

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
