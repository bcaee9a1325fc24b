"""The pre-flight NVML reading that a sweep (and so ``gpulane accept``) takes before it
measures: ``record_gpu_state`` -> ``gpu_state.json`` -> ``foreign_on_gpus``, whose answer
every row carries as ``extra.foreign`` and the ``no_foreign_work`` rule judges. Run through
the REAL pynvml over the stand-in library, per machine profile, with the other shapes of
machine: a GPU lost mid-run, MIG, mixed models and a CUDA_VISIBLE_DEVICES subset."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpulane.rundir import HEARTBEAT_DIR, NOTES_FILE
from gpulane.topology import gpu_state

pytest.importorskip("pynvml")
Machine = Callable[..., None]


def notes(run_dir: Path) -> str:
    path = run_dir / HEARTBEAT_DIR / NOTES_FILE
    return path.read_text() if path.exists() else ""


def test_busy_gpu_is_named_with_its_pid_unless_it_is_the_runs_own(
    machine: Machine, tmp_path: Path
) -> None:
    machine("h200x4_busy")
    busy = gpu_state.record_gpu_state(tmp_path, "before", {4000})
    words = "GPU2 runs pid 1416 (python3, 3.1 GiB) and its clocks are held at its power cap"
    assert busy == {"GPU2": words}
    assert gpu_state.foreign_on_gpus(tmp_path) == {"GPU2": words}
    assert words in notes(tmp_path)
    machine("h200x4_busy")
    (tmp_path / "own").mkdir()
    assert gpu_state.record_gpu_state(tmp_path / "own", "before", {1416}) == {}


def test_healthy_gpu_reads_as_read_and_free(machine: Machine, tmp_path: Path) -> None:
    machine("h200x1")
    gpu_state.record_gpu_state(tmp_path, "before", set())
    assert gpu_state.foreign_on_gpus(tmp_path) == {}  # read, nothing else: not None
    assert notes(tmp_path) == ""


def test_gpu_lost_mid_reading_is_never_free(machine: Machine, tmp_path: Path) -> None:
    """GPU2 opens, then answers NVML_ERROR_GPU_IS_LOST: before the fix its other calls
    read None and it looked idle, a false "no foreign work" PASS."""
    machine("h200x4_busy", lost="2:1")
    raw = gpu_state.capture()
    assert [g.get("lost") for g in raw["gpus"]] == [None, None, "GPU is lost", None]
    assert raw["gpus"][3]["power_mw"] == 83557  # the GPUs after it still read
    machine("h200x4_busy", lost="2:1")
    assert gpu_state.record_gpu_state(tmp_path, "before", set()) == {}
    # not read, so not judged: the rows carry no extra.foreign and the rule cannot pass
    assert gpu_state.foreign_on_gpus(tmp_path) is None
    assert "GPU2 could not be read through NVML (GPU is lost)" in notes(tmp_path)


def test_mig_mode_and_its_devices_are_read(machine: Machine) -> None:
    machine("mig_a100")
    (gpu,) = gpu_state.capture()["gpus"]
    assert (gpu["name"], gpu["mig"], gpu["mig_devices"]) == ("NVIDIA A100 80GB PCIe", True, 2)
    machine("h200x1")
    (gpu,) = gpu_state.capture()["gpus"]
    assert gpu["mig"] is False and "mig_devices" not in gpu


def test_mig_gpu_topology_says_what_is_not_measured(machine: Machine) -> None:
    from gpulane.topology.live import probe_topology

    machine("mig_a100")
    topo = probe_topology()
    assert [w for w in topo.warnings if "MIG" in w] == [
        "GPU0: MIG mode on: collectives, peer copies and NVLink figures of this GPU are not "
        "measured (no P2P or NVLink between MIG devices); copies and tokens measure one MIG slice"
    ]


def test_mixed_models_keep_their_own_names_and_links(machine: Machine) -> None:
    from gpulane.topology.live import probe_topology

    machine("mixed_3090_1080")
    topo = probe_topology()
    got = [(g.name, g.model, g.pcie.width, g.pcie.gen_max) for g in topo.gpus if g.pcie]
    assert got == [
        ("GPU0", "NVIDIA GeForce RTX 3090", 4, 4),
        ("GPU1", "NVIDIA GeForce GTX 1080", 4, 3),
    ]
    assert [g.pcie.gen for g in topo.gpus if g.pcie] == [None, None]  # not in the capture
    assert [p.label for p in topo.pairs] == ["PHB"]


def test_gpu_lost_at_start_is_named_in_the_topology(machine: Machine) -> None:
    from gpulane.topology.live import probe_topology

    machine("h200x4_busy", lost="2:0")
    missing = probe_topology().missing
    assert any(m.startswith("NVML: GPU2 could not be read (GPU is lost)") for m in missing)


@pytest.mark.parametrize(
    ("visible", "want"), [(None, "PHB"), ("0,1", "PHB"), ("2,3", "SYS"), ("0,2", "NODE")]
)
def test_worst_path_uses_physical_indices_under_cuda_visible_devices(
    machine: Machine, monkeypatch: pytest.MonkeyPatch, visible: str | None, want: str
) -> None:
    """pcie_only: GPU0-GPU1 PHB, GPU0-GPU2 NODE, GPU2-GPU3 SYS (NVML numbering). CUDA's
    devices 0 and 1 are the physical GPUs CUDA_VISIBLE_DEVICES names."""
    from gpulane.topology.live import worst_path_for_gpus

    machine("pcie_only")
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert worst_path_for_gpus([0, 1]) == want


def test_worst_path_of_a_pair_nvml_cannot_label_is_unknown(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpulane.topology.live import worst_path_for_gpus

    machine("pcie_only")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")  # the profile holds no level for 1-3
    assert worst_path_for_gpus([0, 1]) is None


@pytest.mark.parametrize(
    ("visible", "want"),
    [
        (None, {0: 0, 1: 1, 2: 2, 3: 3}),
        ("2,3", {2: 0, 3: 1}),
        ("3,1", {3: 0, 1: 1}),
        ("", {}),
        ("1,7,2", {1: 0}),  # CUDA stops at the first entry that names no GPU
        ("GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39", None),
    ],
)
def test_load_check_copies_on_the_cuda_numbers_of_nvml_gpus(
    monkeypatch: pytest.MonkeyPatch, visible: str | None, want: dict[int, int] | None
) -> None:
    """The under-load copy burst runs on cuda:N; NVML numbers GPUs physically."""
    from gpulane.topology.live import cuda_ordinals

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert cuda_ordinals([0, 1, 2, 3]) == want


def test_load_check_names_the_gpus_cuda_cannot_see(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpulane.topology.live import probe_topology

    machine("pcie_only")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    warnings = probe_topology(under_load=True).warnings
    assert (
        "load check: GPU0, GPU1 not visible to CUDA (CUDA_VISIBLE_DEVICES=2,3): their "
        "links are read at idle only" in warnings
    )
