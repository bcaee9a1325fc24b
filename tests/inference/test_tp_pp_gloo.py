"""The real TP/PP code on CPU: gloo, real rank processes through the local launcher.

TP=2, PP=2 (with micro-batches) and a mixture-of-experts model at TP=2 must give the
logits that one unsplit model gives on the same weights, in the prefill and in every
decode step (the reference below runs the model in this process, with no process group).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from gpulane.inference.memory import cache_len
from gpulane.inference.model import Comm, Init, Stage, StepInput
from gpulane.inference.roofline import step_cost
from gpulane.inference.shapes import shape_from_config
from gpulane.inference.sharding import rank_slices
from tests.helpers import gpulane, rows_of, run_dirs

CONF = Path(__file__).resolve().parents[2] / "gpulane" / "conf" / "model"
BATCH, INPUT_LEN, OUTPUT_LEN = 3, 12, 5


def reference(model: str, batch: int, input_len: int, output_len: int, index: int = 0) -> Any:
    """Prefill and greedy decode of the whole model in this process (fp32)."""
    shape = shape_from_config(OmegaConf.to_container(OmegaConf.load(CONF / f"{model}.yaml")))  # type: ignore[arg-type]
    clen = cache_len(input_len, output_len)
    init = Init(torch.device("cpu"), torch.float32, 0)
    comm = Comm(None, None, 1, False)
    stage = Stage(
        shape, rank_slices(shape, 1), range(shape.num_layers), True, True, comm, init, clen
    )
    stage.allocate_cache(batch, clen)
    ids = torch.randint(
        0, shape.vocab_size, (batch, input_len), generator=torch.Generator().manual_seed(index)
    )
    rows = slice(0, batch)
    with torch.inference_mode():
        x, r = stage.forward(ids.reshape(-1), None, StepInput(rows, input_len))
        prefill = stage.logits(x, r, input_len)
        tokens = prefill.argmax(-1)
        pos = torch.tensor([input_len])
        mask = (torch.arange(clen) < input_len).view(1, 1, 1, clen).repeat(batch, 1, 1, 1)
        steps = []
        for _ in range(output_len - 1):
            mask.index_fill_(3, pos, True)
            x, r = stage.forward(tokens, None, StepInput(rows, 1, pos, mask))
            logits = stage.logits(x, r, 1)
            steps.append(logits)
            tokens = logits.argmax(-1)
            pos += 1
    return prefill, steps


def launched(tmp_path: Path, model: str, *args: str) -> tuple[Path, dict[str, Any]]:
    out = gpulane(
        "tokens",
        f"model={model}",
        f"batch={BATCH}",
        f"input_len={INPUT_LEN}",
        f"output_len={OUTPUT_LEN}",
        "device=cpu",
        "dtype=fp32",
        "dump_logits=true",
        "warmup=0",
        "iters=1",
        "build=test",
        f"results_dir={tmp_path}",
        *args,
        cwd=tmp_path,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = run_dirs(tmp_path)
    dump = torch.load(run / f"logits-b{BATCH}-i{INPUT_LEN}-o{OUTPUT_LEN}.pt")
    return run, dump


def decode_steps(dump: dict[str, Any]) -> list[torch.Tensor]:
    by_step: dict[int, list[tuple[int, torch.Tensor]]] = {}
    for t, j, logits in dump["decode"]:
        by_step.setdefault(t, []).append((j, logits))
    return [
        torch.cat([lg for _, lg in sorted(parts, key=lambda p: p[0])])
        for _, parts in sorted(by_step.items())
    ]


def same_logits(dump: dict[str, Any], ref: Any) -> None:
    prefill, steps = ref
    torch.testing.assert_close(dump["prefill"], prefill, rtol=1e-4, atol=1e-4)
    got = decode_steps(dump)
    assert len(got) == len(steps) == OUTPUT_LEN - 1
    for a, b in zip(got, steps, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("model", "args", "world"),
    [
        ("tiny", ("tp=2", "pp=1"), 2),
        ("tiny", ("tp=1", "pp=2", "micro_batches=2"), 2),
        ("tiny-moe", ("tp=2", "pp=1"), 2),
        # the compiled path (inductor's C++ on CPUs), split and fused at once
        ("tiny", ("tp=2", "pp=1", "compile=true"), 2),
    ],
    ids=["tp2", "pp2-microbatches", "moe-tp2", "tp2-compiled"],
)
def test_split_model_gives_the_unsplit_logits(
    tmp_path: Path, model: str, args: tuple[str, ...], world: int
) -> None:
    run, dump = launched(tmp_path, model, *args)
    same_logits(dump, reference(model, BATCH, INPUT_LEN, OUTPUT_LEN))
    rows = rows_of(run)
    assert [r["op"] for r in rows] == ["prefill", "decode"]
    for r in rows:
        assert r["kind"] == "tokens" and r["status"] == "ok" and r["world_size"] == world
        assert r["backend"] == "torch-gloo" and r["model"] == model
        assert (r["batch"], r["input_len"], r["output_len"]) == (BATCH, INPUT_LEN, OUTPUT_LEN)
        assert r["tokens_per_s"] > 0 and r["ttft_ms"] > 0
    decode = rows[1]
    compiled = "compile=true" in args
    for r in rows:  # the kernels each row was measured with
        assert r["extra"]["engine"] == "gpulane" and r["extra"]["compile"] is compiled
        assert bool(r["extra"]["fused_ops"]) is compiled
        assert (r["extra"]["compile_s"] > 0) is compiled
    assert decode["itl_ms_p99"] >= decode["itl_ms_p50"] > 0
    # the host's time to issue the timed prefill, inside the marks around it (on CPUs the
    # clocks are one); no graph, so no eager prefill beside it and no host time of one
    pre = rows[0]["extra"]
    assert 0 < pre["host_ms"] <= rows[0]["ttft_ms"]
    assert "eager_ms" not in pre and "eager_host_ms" not in pre
    # the rows carry the roofline of the step that rank 0 (stage 0) ran, from the one
    # function advise and the benchmarks use
    shape = shape_from_config(OmegaConf.to_container(OmegaConf.load(CONF / f"{model}.yaml")))  # type: ignore[arg-type]
    tp, pp = rows[0]["tp"], rows[0]["pp"]
    per_mb = -(-BATCH // decode["extra"]["micro_batches"])
    chunk = -(-BATCH // rows[0]["extra"]["prefill_chunks"])
    want = {
        "prefill": step_cost(shape, "prefill", chunk, INPUT_LEN, 4, tp, pp, 0),
        "decode": step_cost(
            shape, "decode", per_mb, cache_len(INPUT_LEN, OUTPUT_LEN), 4, tp, pp, 0
        ),
    }
    for r in rows:
        roof = r["extra"]["roofline"]
        assert {k: roof[k] for k in want[r["op"]].to_dict()} == want[r["op"]].to_dict()
        assert roof["bytes"] > roof["weight_bytes"] > 0 and roof["flops"] > 0
    assert decode["extra"]["steps"] == OUTPUT_LEN - 1
    if "tp=2" in args:
        # the all-reduces rank 0 made in one step are what the sharding arithmetic says
        seen = {(c["op"], c["size_bytes"]): c["count"] for c in decode["extra"]["comm_seen_rank0"]}
        want = {(c["op"], c["size_bytes"]): c["count"] for c in decode["extra"]["comm_per_step"]}
        assert seen == want
        assert 0.0 <= decode["comm_share"] < 1.0
    else:
        assert decode["comm_share"] == 0.0
        assert decode["extra"]["micro_batches"] == 2
