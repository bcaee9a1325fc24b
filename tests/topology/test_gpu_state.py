"""Foreign processes and clocks from an NVML capture (gpulane.topology.gpu_state).

The fixture tests/fixtures/handmade/nvml-gpu2-busy.json is HAND-MADE in the shape that
benchmarks/accept/capture_nvml.py writes; the real capture from the 4-GPU machine goes to
tests/fixtures/h200x4/nvml-*.json and is read by the same tests when it is there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulane.errors import ParseError
from gpulane.topology.gpu_state import (
    GPU_STATE_FILE,
    foreign_on_gpus,
    gpu_states,
    reason_words,
    record_gpu_state,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HANDMADE = FIXTURES / "handmade" / "nvml-gpu2-busy.json"
CAPTURED = sorted((FIXTURES / "h200x4").glob("nvml-busy*.json"))


def test_the_busy_gpu_and_its_process_in_words() -> None:
    states = gpu_states(json.loads(HANDMADE.read_text()))
    assert [s.name for s in states] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    busy = [s for s in states if s.foreign]
    assert [s.name for s in busy] == ["GPU2"]
    assert busy[0].words() == (
        "GPU2 runs pid 1967 (python3, 100 %, 1.9 GiB) and its clocks are held at its "
        "power cap (695 W of 700 W, 62 C)"
    )
    assert states[0].words() == ""


def test_the_runs_own_processes_are_not_foreign() -> None:
    states = gpu_states(json.loads(HANDMADE.read_text()), own_pids={1967})
    assert not any(s.foreign for s in states)
    # the clocks are still held down: that is the GPU's, not the process's
    assert states[2].held_down == ["SW Power Cap"]


def test_reason_bits() -> None:
    assert reason_words(0) == [] and reason_words(None) == []
    assert reason_words(0x1 | 0x4 | 0x40) == ["Idle", "SW Power Cap", "HW Thermal Slowdown"]


def test_a_capture_without_processes_or_fields_reads_as_nothing() -> None:
    states = gpu_states({"gpus": [{"index": 0}]})
    assert states[0].foreign == [] and states[0].words() == ""
    assert gpu_states({"gpus": [], "error": "NVML not available"}) == []


def test_record_on_a_machine_without_nvml_writes_the_reason(tmp_path: Path) -> None:
    assert record_gpu_state(tmp_path, "before", {1}) == {}
    saved = json.loads((tmp_path / GPU_STATE_FILE).read_text())
    assert saved["before"]["gpus"] == [] or saved["before"]["raw"]["gpus"]
    assert foreign_on_gpus(tmp_path) is None  # not read: not "nothing found"


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.name)
def test_real_capture_names_the_busy_gpu(path: Path) -> None:
    doc = json.loads(path.read_text())
    states = gpu_states(doc.get("nvml", doc))
    busy = [s for s in states if s.foreign]
    assert [s.name for s in busy] == ["GPU2"]
    assert busy[0].foreign[0].name and busy[0].foreign[0].used_bytes


def test_the_real_capture_of_the_busy_gpu_in_words() -> None:
    """tests/fixtures/h200x4/nvml-busy-gpu2.json: NVML on the lent 4x H200 while
    benchmarks/gpu/foreign_load.py kept GPU2 busy (2026-11-27, benchmarks/gpu/h200x4-smoke)."""
    doc = json.loads((FIXTURES / "h200x4" / "nvml-busy-gpu2.json").read_text())
    states = {s.name: s for s in gpu_states(doc)}
    assert states["GPU2"].words() == (
        "GPU2 runs pid 1416 (python3, 93 %, 3.1 GiB) and its clocks are held at its power cap"
        " (692 W of 700 W, 59 C)"
    )
    assert [n for n, s in states.items() if s.words()] == ["GPU2"]
    idle = gpu_states(json.loads((FIXTURES / "h200x4" / "nvml-idle.json").read_text()))
    assert [s.words() for s in idle] == ["", "", "", ""]


@pytest.mark.parametrize("bad", [[], {"gpus": "x"}, {"gpus": [{"name": "GPU0"}]}])
def test_a_capture_of_another_shape_is_one_parse_error(bad: object) -> None:
    with pytest.raises(ParseError, match="not an NVML capture"):
        gpu_states(bad)  # type: ignore[arg-type]


def test_doctor_names_the_foreign_process_from_a_runs_reading(tmp_path: Path) -> None:
    from gpulane.analysis.doctor import run_doctor
    from gpulane.topology.evidence import DoctorFiles, add_run, gather_files

    run = tmp_path / "run"
    run.mkdir()
    raw = json.loads(HANDMADE.read_text())
    (run / GPU_STATE_FILE).write_text(json.dumps({"before": {"own_pids": [11], "raw": raw}}))
    (run / "rows.jsonl").write_text(json.dumps({"run_id": "r", "kind": "collective"}) + "\n")
    ev = gather_files(DoctorFiles())
    add_run(ev, str(run))
    report = run_doctor(ev, only=["foreign"])
    (f,) = report.findings
    assert (f.severity, f.subject) == ("error", "GPU2")
    assert f.title == "GPU2: in use by another process (pid 1967 (python3, 100 %, 1.9 GiB))"
