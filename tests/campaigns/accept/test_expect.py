"""How many GPUs the node should have (accept gpus=N, a rule set's expect: block), and the
verdict on a node where none is visible: FAIL with an expectation, INCOMPLETE without one,
PASS only with device=cpu. The accepts run the real suite (gloo ranks) on this CPU host."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpulane.analysis.rules import FAIL, PASS
from gpulane.campaigns.accept.expect import expected_gpus, gpu_checks, why_no_gpus
from gpulane.errors import InputError
from tests import helpers

SMALL = [
    "suite.collectives=[all_reduce]",
    "suite.sizes_max=4K",
    "suite.sweep_overrides=['iters=2','warmup=1']",
    "html=false",
]


def test_the_expectation_comes_from_gpus_then_the_rule_set() -> None:
    assert expected_gpus(None, {}) is None
    assert expected_gpus(None, {"expect": {"gpus": 8}}) == 8
    assert expected_gpus(4, {"expect": {"gpus": 8}}) == 4  # gpus= wins
    for given, spec in ((0, {}), (None, {"expect": {"gpus": "x"}}), (None, {"expect": [8]})):
        with pytest.raises(InputError):
            expected_gpus(given, spec)
    with pytest.raises(InputError, match="unknown key"):
        expected_gpus(None, {"expect": {"nics": 2}})


@pytest.mark.parametrize("expected", [1, 2, 4, 8])
def test_fewer_gpus_than_expected_fail_naming_the_cause(expected: int) -> None:
    (line,), missing = gpu_checks(expected, 0, "auto")
    assert line.status == FAIL and missing == []
    assert f"0 GPU(s) visible, expected {expected}: " in line.message
    assert why_no_gpus() in line.message
    (ok,), _ = gpu_checks(expected, expected, "auto")
    assert ok.status == PASS
    (short,), _ = gpu_checks(expected + 1, expected, "cuda")
    assert short.status == FAIL and short.value == expected and short.threshold == expected + 1


def test_the_cause_names_an_empty_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "CUDA_VISIBLE_DEVICES is set and empty" in why_no_gpus()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    if not any(Path(p).exists() for p in ("/dev/nvidiactl", "/proc/driver/nvidia")):
        assert "no NVIDIA driver is loaded" in why_no_gpus()


def test_no_expectation_and_no_gpu_is_missing_not_passed() -> None:
    checks, (missing,) = gpu_checks(None, 0, "auto")
    assert checks == [] and missing.rule == "gpus" and "device=cpu" in missing.supply
    assert gpu_checks(None, 0, "cpu") == ([], [])
    assert gpu_checks(None, 2, "auto") == ([], [])


def _accept(tmp_path: Path, *more: str) -> tuple[int, str, dict]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    runs = tmp_path / "runs"
    tmp_path.mkdir(exist_ok=True)
    proc = helpers.gpulane(
        "accept", f"results_dir={runs}", *SMALL, *more, cwd=tmp_path, env=env, timeout=300
    )
    (found,) = runs.glob("*/accept.json")
    return proc.returncode, proc.stdout + proc.stderr, json.loads(found.read_text())


def test_a_node_without_gpus_is_incomplete_or_fails_its_expectation(tmp_path: Path) -> None:
    rc, out, doc = _accept(tmp_path / "a")
    assert rc == 3 and doc["verdict"] == "INCOMPLETE", out
    assert "# missing: gpus: no GPU is visible (CUDA_VISIBLE_DEVICES is set and empty" in out
    rc, out, doc = _accept(tmp_path / "b", "gpus=8")
    assert rc == 1 and doc["verdict"] == "FAIL", out
    (line,) = [c for c in doc["checks"] if c["rule"] == "gpus"]
    assert line["status"] == "fail" and "0 GPU(s) visible, expected 8" in line["message"]
    assert "CUDA_VISIBLE_DEVICES is set and empty" in line["message"]


def test_a_rules_file_says_how_many_gpus(tmp_path: Path) -> None:
    from gpulane.campaigns.accept.rules_input import load_rules_file

    own = tmp_path / "eight.yaml"
    own.write_text(
        "defaults: [default]\nexpect: {gpus: 8}\nchecks:\n  rows_ok: {check: status_ok}\n"
    )
    assert expected_gpus(None, load_rules_file(str(own))) == 8


def _rows_frame(*machines: tuple[str, dict[str, str]]) -> Any:
    from gpulane.analysis.store import frame_from_rows
    from gpulane.record import Row

    rows = [
        Row(run_id="r", kind="collective", backend=backend, op="all_reduce", build="b",
            host="h", world_size=2, size_bytes=8, busbw_gbps=1.0, versions=versions)
        for backend, versions in machines
    ]  # fmt: skip
    return frame_from_rows(rows)


def test_stored_rows_of_cpu_ranks_are_incomplete_unless_meant() -> None:
    """accept run= over rows that only CPU processes measured (gloo ranks, MPI through
    host memory) is INCOMPLETE as a live suite without GPUs is; device=cpu accepts them."""
    from gpulane.campaigns.accept.expect import stored_rows_checks

    gloo = ("torch-gloo", {"torch": "2.13.0+cpu"})
    mpi_host = ("mpi", {"mpi_buffers": "host"})
    h200 = ("nccl", {"gpu": "NVIDIA H200", "cuda": "13.0"})
    parsed = ("nccl-tests", {})  # a parsed nccl-tests log: GPUs, model not named
    (missing,) = stored_rows_checks(_rows_frame(gloo, mpi_host), "auto")
    assert missing.rule == "gpus" and "CPU processes only" in missing.why
    assert "device=cpu" in missing.supply
    assert stored_rows_checks(_rows_frame(gloo), "cpu") == []
    assert stored_rows_checks(_rows_frame(gloo, h200), "auto") == []
    assert stored_rows_checks(_rows_frame(parsed), "auto") == []
