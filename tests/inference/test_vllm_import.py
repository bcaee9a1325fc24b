"""vLLM results as tokens rows: the public printouts, the JSON vLLM writes, an error log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpulane.cli import main as cli_main
from gpulane.errors import ParseError
from gpulane.inference.vllm_import import Meta, parse_vllm, read_vllm
from gpulane.record import read_rows
from tests.conftest import fixture_path
from tests.parse_helpers import cut_copy, json_rows, run_parse

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
    # Printed "inf" (no rate limit): null in the row, with a note; the row is strict JSON.
    assert row.extra["request_rate"] is None
    assert any("request_rate was inf" in note for note in row.extra["notes"])
    json.dumps(row.to_dict(), allow_nan=False)
    assert row.extra["max_concurrency"] is None


def test_throughput_line() -> None:
    (row,) = parse_vllm(text(THROUGHPUT), THROUGHPUT)
    assert row.op == "throughput"
    assert row.tokens_per_s == 1072.15  # output tokens/s
    assert row.extra["requests_per_second"] == 7.15
    assert row.extra["total_num_prompt_tokens"] == 5014


def test_a_throughput_line_cut_inside_its_output_rate_is_no_result(tmp_path: Path) -> None:
    # found by the cut fuzz test: "..., 4656.00 total tokens/s, 10" read as a whole line
    cut = tmp_path / "cut.txt"
    cut.write_bytes(text(THROUGHPUT).encode()[:53])
    with pytest.raises(ParseError, match="no vLLM benchmark result found"):
        list(read_vllm(cut))


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
    out = tmp_path / "run"
    assert cli_main(["parse", "vllm", *files, "--out", str(out), "--tp", "2", "--build", "b"]) == 0
    tmp_path = out
    rows = list(read_rows(tmp_path / "rows.jsonl"))
    assert [r.op for r in rows] == ["serving", "throughput"]
    assert {r.tp for r in rows} == {2} and len({r.run_id for r in rows}) == 1
    assert (tmp_path / "rows.parquet").exists()


def test_gpulane_parse_vllm_error_exit() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpulane", "parse", "vllm", str(fixture_path(ERROR))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("gpulane: error: ") and "ValueError" in out.stderr
    assert "Traceback" not in out.stderr


def test_p99_itl_cut_short_is_not_a_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A P99 ITL of 1155.89 cut to `115`: no 115.0 in any row; an error row at the cut."""
    path = cut_copy(tmp_path, QWEN, "1155.89", 3)
    status, out, err = run_parse(capsys, "vllm", str(path), "--json")
    assert status == 0
    serving, cut = json_rows(out)
    assert serving["status"] == "ok" and serving["itl_ms_p99"] is None
    assert serving["itl_ms_p50"] == 262.69  # complete lines are kept
    assert cut["status"] == "error" and cut["op"] == "serving"
    assert cut["error"] == (
        f"{path}:23: the Serving Benchmark Result block (line 4) is cut off at line 23 (the "
        "file ends inside 'P99 ITL (ms):                            115') before its closing "
        "'====' line"
    )
    assert "1 of 2 rows are errors" in err


def test_throughput_line_cut_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_copy(tmp_path, THROUGHPUT, "1072.15", 4)
    status, out, err = run_parse(capsys, "vllm", str(path), "--json")
    assert status == 1
    (cut,) = json_rows(out)
    assert cut["tokens_per_s"] is None and cut["error"].startswith(
        f"{path}:1: the file ends inside"
    )
    assert "nothing measured" in err


def test_throughput_without_its_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cut_copy(tmp_path, THROUGHPUT, "Total num output", 0)
    status, out, _ = run_parse(capsys, "vllm", str(path), "--json")
    row, cut = json_rows(out)
    assert status == 0 and row["tokens_per_s"] == 1072.15
    assert cut["error"] == (
        f"{path}:2: the Throughput result (line 1) ends at line 2 before its "
        "'Total num output tokens' line"
    )


LATENCY = """Avg latency: 1.2532 seconds
10% percentile latency: 1.2101 seconds
25% percentile latency: 1.2288 seconds
50% percentile latency: 1.2503 seconds
75% percentile latency: 1.2790 seconds
90% percentile latency: 1.2901 seconds
99% percentile latency: 1.3012 seconds
"""


def test_latency_printout_and_its_missing_percentiles(tmp_path: Path) -> None:
    (row,) = parse_vllm(LATENCY, "lat.txt")
    assert row.time_us == pytest.approx(1.2532e6) and row.time_us_p99 == pytest.approx(1.3012e6)
    cut = parse_vllm(LATENCY[: LATENCY.index("90%")], "lat.txt")
    assert [r.status for r in cut] == ["ok", "error"]
    assert cut[1].error == (
        "lat.txt:5: the latency result (line 1) ends at line 5 before its 90%, 99% percentile lines"
    )


def test_json_infinity_becomes_null_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "serve.json"
    # What json.dump writes for vLLM's request_rate=inf
    path.write_text('{"completed": 5, "output_throughput": 99.5, "request_rate": Infinity}\n')
    status, out, _ = run_parse(capsys, "vllm", str(path), "--json")
    (row,) = json_rows(out)
    assert status == 0 and row["extra"]["request_rate"] is None
    assert row["extra"]["notes"] == [
        "request_rate was inf in the file (vLLM's 'no rate limit': every request sent at once); "
        "stored as null"
    ]


def test_json_cut_off_is_a_parse_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lat.json"
    path.write_text('{\n    "avg_latency": 1.25,\n    "latencies": [1.2, 1.2')
    status, out, err = run_parse(capsys, "vllm", str(path))
    assert status == 2 and "error:" not in out
    assert err.startswith(f"gpulane: error: {path}:3: not valid JSON (")
    assert err.rstrip().endswith("the file is cut off")


def test_json_over_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpulane.inference import vllm_import

    monkeypatch.setattr(vllm_import, "JSON_LIMIT", 64)
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"avg_latency": 1.0, "latencies": [1.0] * 50}, indent=4))
    status, _, err = run_parse(capsys, "vllm", str(path))
    assert status == 2
    assert err == (
        f"gpulane: error: {path}: more than 0 MiB of JSON: too large for a vLLM benchmark "
        "result (gpulane reads those whole)\n"
    )


def test_utf16_printout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "serving.txt"
    path.write_bytes(text(SERVING).encode("utf-16"))
    status, out, _ = run_parse(capsys, "vllm", str(path), "--json")
    assert status == 0 and json_rows(out)[0]["tokens_per_s"] == 382.89


def test_a_serving_figure_cut_after_its_colon_is_an_error_not_a_string(tmp_path: Path) -> None:
    # found by the cut fuzz test: "Successful requests:" with its number cut off was kept
    # as the string '' in a numeric field
    whole = text(QWEN)
    at = whole.index("Successful requests:") + len("Successful requests:")
    cut = tmp_path / "cut.txt"
    cut.write_text(whole[:at] + "    \n" + whole[at:].split("\n", 1)[1])
    with pytest.raises(ParseError, match=r"Successful requests: '' is not a number"):
        list(read_vllm(cut))
