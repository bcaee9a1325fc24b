"""`gpulane advise` as a user runs it: rows and topology files in, a table or JSON out;
and measure=true, which runs `gpulane sweep` in a child process and reads its rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpulane.commands.advise import main
from gpulane.planning.comm import MeasuredComm
from gpulane.planning.inputs import load_rows, measure_now
from gpulane.session.world import local_gpus
from tests.conftest import fixture_path


def test_command_json_on_the_h200_rows(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["model=llama3-70b", "gpus=2", "batch=1,32", "input_len=2048", "output_len=256",
            f"run={fixture_path('advise/nvlink-rows.jsonl')}",
            f"topology={fixture_path('advise/topology-h200x2.json')}", "format=json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["build"] == "nvlink" and doc["gpu"]["name"] == "H200" and not doc["projection"]
    assert {(p["name"], p["batch"]) for p in doc["predictions"]} == {
        ("TP=2", 1), ("PP=2", 1), ("TP=2", 32), ("PP=2", 32)}  # fmt: skip
    assert doc["collectives"]["all_reduce over 2"] == "measured nccl graph bfloat16"
    assert {r["goal"]: r["split"] for r in doc["recommendations"]} == {
        "latency": "TP=2", "throughput": "TP=2"}  # fmt: skip
    assert "2 all-reduces per layer" in doc["model_text"]


def test_command_table_and_what_if(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["model=llama3-8b", "batch=1,16", "input_len=1024", "output_len=64",
            f"topology={fixture_path('advise/topology-h200x2.json')}", "what_if=pcie:3x4"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PROJECTION" in out and "Gen3 x4" in out and "projected PHB" in out
    assert "recommended for latency" in out and "rule of thumb" in out
    assert "2 all-reduces per layer" in out


def test_command_without_rows_says_what_to_give(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus=2", "gpu=H200"]) == 2
    assert "no collective rows" in capsys.readouterr().err
    # a word outside a closed set is refused by the config check, before advise runs:
    # through the CLI, one error line and exit 2
    from gpulane.cli import main as cli

    assert cli(["advise", "gpus=2", "format=yaml", "gpu=H200"]) == 2
    assert "format: expected table or json, got 'yaml'" in capsys.readouterr().err


def test_measure_now_runs_the_sweep_and_reads_only_its_rows(tmp_path: Path) -> None:
    """A real `python -m gpulane sweep` on gloo ranks; an older run of another build in
    the same results directory is not read."""
    old = tmp_path / "older-run"
    old.mkdir()
    shutil.copy(fixture_path("advise/nvlink-rows.jsonl"), old / "rows.jsonl")
    made = measure_now([2], "advise-measured", tmp_path, device="cpu", passes=((False, "1K"),))
    assert len(made) == 1 and Path(made[0]).parent == tmp_path
    rows, paths = load_rows(made, "advise-measured", str(tmp_path))
    assert paths == [Path(made[0])]
    coll = [r for r in rows if r.kind == "collective"]
    # sendrecv is out-of-place only on torch: on 2 ranks measure_now asks for both
    # placements, so that sends are timed as sendrecv
    assert {r.op for r in coll} == {"all_reduce", "all_gather", "sendrecv"}
    assert {r.in_place for r in coll if r.op == "sendrecv"} == {False}
    assert {r.build for r in coll} == {"advise-measured"}
    assert {r.world_size for r in coll} == {2} and max(r.size_bytes for r in coll) == 1024
    send = MeasuredComm(coll).time("send", 2, 512)
    assert send is not None and send.source.startswith("measured torch-gloo bfloat16")
    assert "all_gather" not in send.source


def test_command_measure_true(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With two GPUs the collectives are measured and advised on; without, the sweep's
    own error comes first and advise says which measurement failed."""
    argv = ["measure=true", "gpus=2", "gpu=H200", "model=llama3-8b", "batch=1",
            "input_len=128", "output_len=8", "topology=none", f"results_dir={tmp_path}",
            "format=json"]  # fmt: skip
    status = main(argv)
    captured = capsys.readouterr()
    if local_gpus() >= 2:
        assert status == 0
        doc = json.loads(captured.out[captured.out.index("{") :])
        assert doc["build"] == "advise-measured"
        assert doc["collectives"]["all_reduce over 2"].startswith("measured")
    else:
        assert status == 1
        assert "measuring the collectives failed (sweep" in captured.err
        assert "device=cuda" in captured.err


def test_without_tokens_rows_advise_names_the_runs_that_would_calibrate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["model=llama3-70b", "gpus=2", "batch=1,32", "input_len=2048", "output_len=256",
            f"run={fixture_path('advise/nvlink-rows.jsonl')}", "topology=none", "gpu=H200",
            "format=json"]  # fmt: skip
    assert main(argv) == 0
    text = json.loads(capsys.readouterr().out)["calibration"]
    assert text.startswith("no gpulane tokens rows of llama3-70b: compute from the plain roofline")
    for tp in (1, 2):
        assert (
            f"gpulane tokens model=llama3-70b layers=8 tp={tp} pp=1 batch=1,32 input_len=2048 "
            "output_len=16 warmup=1 iters=2 comm_off=true engine=gpulane build=nvlink"
        ) in text
    assert "8 of 80 layers of llama3-70b at TP=1 and TP=2" in text and "measure=true" in text


def test_measure_true_calibrates_on_a_short_run_of_the_model_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No tokens rows of the model: real `python -m gpulane tokens` runs of it at TP=1 and
    TP=2 (gloo ranks here) calibrate the compute model, and the advice says so."""
    argv = ["model=tiny", "gpus=2", "gpu=H200", "batch=2", "input_len=32", "output_len=8",
            f"run={fixture_path('advise/nvlink-rows.jsonl')}", "topology=none",
            "measure=true", f"results_dir={tmp_path}", "format=json"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("# calibrating compute: gpulane tokens model=tiny layers=4 tp=") == 2
    doc = json.loads(out[out.index("{") :])
    assert doc["calibration"].startswith(
        "calibrated on a short run made now: 4 of 4 layers of tiny at TP=1 and TP=2"
    )
    (compute,) = doc["compute"]
    assert compute.startswith("roofline calibrated on tokens runs: decode x")
    tokens = [r for d in tmp_path.iterdir() for r in load_rows([str(d)], None, str(tmp_path))[0]]
    assert {(r.tp, r.layers, r.build) for r in tokens} == {
        (1, 4, "nvlink"), (2, 4, "nvlink")}  # fmt: skip
