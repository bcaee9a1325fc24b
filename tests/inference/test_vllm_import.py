"""vLLM results as tokens rows: the public printouts, the JSON vLLM writes, an error log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpulane.errors import ParseError
from gpulane.inference.vllm_import import Meta, main, parse_vllm
from gpulane.record import read_rows
from tests.conftest import fixture_path

SERVING = "public/vllm/vllm_readme_benchmark_serving_sharegpt_10prompts.txt"
QWEN = "public/vllm/wangjunjian_tp8_qwen72b_benchmark_serving_sharegpt.txt"
THROUGHPUT = "public/vllm/vllm_readme_benchmark_throughput_sonnet.txt"
ERROR = "public/vllm/wangjunjian_vllm_serve_tp8_ValueError_heads_not_divisible.txt"


def text(name: str) -> str:
    return fixture_path(name).read_text()


def test_serving_summary() -> None:
    (row,) = parse_vllm(text(SERVING), SERVING)
    assert (row.kind, row.backend, row.op, row.source) == ("tokens", "vllm", "serving", SERVING)
    assert row.tokens_per_s == 382.89
    assert row.ttft_ms == 71.54
    assert (row.itl_ms_p50, row.itl_ms_p99) == (7.70, 8.39)
    assert row.time_us == pytest.approx(7910.0)  # mean TPOT
    assert row.iters == 10
    assert row.extra["total_input_tokens"] == 1369
    assert row.extra["median_ttft_ms"] == 73.88


def test_serving_with_preamble_and_meta() -> None:
    (row,) = parse_vllm(text(QWEN), QWEN, Meta(tp=8, model="Qwen2.5-72B-Instruct", build="dcu"))
    assert (row.tp, row.model, row.build) == (8, "Qwen2.5-72B-Instruct", "dcu")
    assert row.tokens_per_s == 597.34 and row.ttft_ms == 103921.52
    assert row.itl_ms_p99 == 1155.89
    assert row.extra["request_rate"] == float("inf")
    assert row.extra["max_concurrency"] is None


def test_throughput_line() -> None:
    (row,) = parse_vllm(text(THROUGHPUT), THROUGHPUT)
    assert row.op == "throughput"
    assert row.tokens_per_s == 1072.15  # output tokens/s
    assert row.extra["requests_per_second"] == 7.15
    assert row.extra["total_num_prompt_tokens"] == 5014


def test_error_log_is_a_parse_error_naming_the_exception() -> None:
    with pytest.raises(ParseError) as err:
        parse_vllm(text(ERROR), ERROR)
    assert err.value.line == len(text(ERROR).splitlines())
    assert "attention heads (28) must be divisible by tensor parallel size (8)" in str(err.value)
    assert str(err.value).startswith(ERROR)


def test_bench_latency_json() -> None:
    data = {
        "avg_latency": 1.25,
        "latencies": [1.2, 1.25, 1.3],
        "percentiles": {"10": 1.2, "25": 1.22, "50": 1.25, "75": 1.28, "90": 1.29, "99": 1.3},
    }
    (row,) = parse_vllm(json.dumps(data), "lat.json", Meta(batch=8, output_len=128, tp=2))
    assert row.op == "latency" and row.time_us == pytest.approx(1.25e6)
    assert row.time_us_p99 == pytest.approx(1.3e6)
    assert row.tokens_per_s == pytest.approx(8 * 128 / 1.25)
    assert row.iters == 3


def test_bench_throughput_and_serving_json() -> None:
    thr = {"elapsed_time": 10.0, "num_requests": 100, "total_num_tokens": 50000,
           "requests_per_second": 10.0, "tokens_per_second": 5000.0}  # fmt: skip
    (row,) = parse_vllm(json.dumps(thr), "t.json", Meta(output_len=128))
    assert row.tokens_per_s == pytest.approx(100 * 128 / 10.0)
    serving = {"completed": 5, "output_throughput": 99.5, "mean_ttft_ms": 12.0,
               "median_itl_ms": 3.0, "p99_itl_ms": 4.0, "ttfts": [0.1] * 5,
               "model_id": "m", "max_concurrency": 4}  # fmt: skip
    (row,) = parse_vllm(json.dumps(serving), "s.json")
    assert (row.tokens_per_s, row.ttft_ms, row.model, row.batch) == (99.5, 12.0, "m", 4)
    assert "ttfts" not in row.extra


@pytest.mark.parametrize(
    "bad",
    ["", "hello\nworld\n", "{not json", '{"something": 1}', "[1, 2]"],
)
def test_other_text_is_refused_clearly(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_vllm(bad, "x.txt")


def test_cli_writes_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(fixture_path(SERVING)), str(fixture_path(THROUGHPUT))]
    assert main([*files, "--out", str(tmp_path), "--tp", "2", "--build", "b"]) == 0
    rows = list(read_rows(tmp_path / "rows.jsonl"))
    assert [r["op"] for r in rows] == ["serving", "throughput"]
    assert {r["tp"] for r in rows} == {2} and len({r["run_id"] for r in rows}) == 1
    assert (tmp_path / "rows.parquet").exists()


def test_gpulane_parse_vllm_error_exit() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpulane.cli", "parse", "vllm", str(fixture_path(ERROR))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("gpulane: error: ") and "ValueError" in out.stderr
    assert "Traceback" not in out.stderr
