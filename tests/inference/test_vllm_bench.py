"""engine=vllm: the commands gpulane gives vLLM, and what it makes of vLLM's results.

vLLM cannot be installed on the machines this project runs on (neither the CPU VMs nor the
lent H200 machine, which reaches no registry), so the engine's import side is checked
here on vLLM's recorded outputs (tests/fixtures/public/vllm) and on results in the format
`vllm bench latency --output-json` writes; the run itself is the user's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulane.config.commands import TokensConfig, VllmConfig
from gpulane.inference.table import results_table
from gpulane.inference.vllm_bench import latency_rows, vllm_commands
from gpulane.inference.vllm_import import Meta, parse_vllm, read_vllm
from tests.conftest import fixture_path
from tests.helpers import gpulane


def _cfg(graph: bool = True) -> TokensConfig:
    return TokensConfig(
        dtype="bf16", warmup=2, iters=5, graph=graph,
        vllm=VllmConfig(model_path="/models/Llama-3.1-8B", load_format="dummy",
                        extra_args=["--max-model-len", "4096"]),
    )  # fmt: skip


def test_commands_carry_the_same_split_batch_and_lengths(tmp_path: Path) -> None:
    cmds = vllm_commands(_cfg(), 2, 1, 16, 1024, 64, tmp_path)
    assert list(cmds) == ["prefill", "latency", "throughput"]

    def value(cmd: list[str], flag: str) -> str:
        return cmd[cmd.index(flag) + 1]

    for name, cmd in cmds.items():
        assert cmd[cmd.index("bench") + 1] == ("throughput" if name == "throughput" else "latency")
        assert value(cmd, "--tensor-parallel-size") == "2"
        assert value(cmd, "--pipeline-parallel-size") == "1"
        assert value(cmd, "--dtype") == "bfloat16" and value(cmd, "--load-format") == "dummy"
        assert value(cmd, "--input-len") == "1024"
        assert value(cmd, "--output-json") == str(tmp_path / f"vllm-{name}-b16-i1024-o64.json")
        assert cmd[-2:] == ["--max-model-len", "4096"] and "--enforce-eager" not in cmd
    assert value(cmds["prefill"], "--output-len") == "1"
    assert value(cmds["latency"], "--output-len") == "64"
    assert value(cmds["latency"], "--batch-size") == "16"
    assert value(cmds["latency"], "--num-iters") == "5"
    # throughput: 16 requests in flight at a time, four waves of them
    assert value(cmds["throughput"], "--max-num-seqs") == "16"
    assert value(cmds["throughput"], "--num-prompts") == "64"
    eager = vllm_commands(_cfg(graph=False), 1, 2, 1, 512, 8, tmp_path)
    assert all("--enforce-eager" in c for c in eager.values())


def test_two_latency_runs_give_prefill_and_decode_rows_in_the_tokens_table() -> None:
    meta = Meta(build="vllm-box", run_id="r1", model="llama3-8b", tp=2, pp=1, batch=16,
                input_len=1024, output_len=64)  # fmt: skip
    pct = {"10": 0.5, "25": 0.5, "50": 0.5, "75": 0.5, "90": 0.51, "99": 0.52}
    first = parse_vllm(json.dumps({"avg_latency": 0.5, "latencies": [0.5] * 3,
                                   "percentiles": pct}), "p.json", meta)[0]  # fmt: skip
    whole_pct = {k: v + 0.315 for k, v in pct.items()}
    whole = parse_vllm(json.dumps({"avg_latency": 0.815, "latencies": [0.815] * 3,
                                   "percentiles": whole_pct}), "l.json", meta)[0]  # fmt: skip
    rows = latency_rows(first, whole, meta, {"engine": "vllm"})
    prefill, decode = rows
    assert (prefill.op, decode.op) == ("prefill", "decode")
    assert prefill.ttft_ms == pytest.approx(500) and prefill.tokens_per_s == pytest.approx(
        16 * 1024 / 0.5
    )
    assert decode.time_us == pytest.approx(0.315e6 / 63)  # 5 ms per step
    assert decode.tokens_per_s == pytest.approx(16 / 0.005)
    assert decode.itl_ms_p50 == pytest.approx(5.0) and decode.itl_ms_p99 == pytest.approx(5.0)
    assert {r.backend for r in rows} == {"vllm"} and decode.extra["engine"] == "vllm"
    # the same table as gpulane's own rows, keyed by model, split, batch and lengths
    table = results_table(rows)
    assert table.row_count == 1


def test_recorded_vllm_throughput_printout_is_a_throughput_row() -> None:
    meta = Meta(model="llama3-8b", tp=1, pp=1, batch=16, input_len=1024, output_len=64)
    (row,) = list(
        read_vllm(fixture_path("public/vllm/vllm_readme_benchmark_throughput_sonnet.txt"), meta)
    )
    assert row.op == "throughput" and row.backend == "vllm"
    assert row.tokens_per_s == pytest.approx(1072.15)  # output tokens/s, as vLLM printed
    assert row.extra["total_num_output_tokens"] == 1500


def test_engine_vllm_where_vllm_is_not_installed_says_so(tmp_path: Path) -> None:
    out = gpulane("tokens", "engine=vllm", "vllm.model_path=/models/x", f"results_dir={tmp_path}",
                  cwd=tmp_path)  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        "gpulane: error: engine=vllm: vllm is not installed; pip install vllm "
        "(or engine=gpulane for gpulane's own decoder)"
    )
