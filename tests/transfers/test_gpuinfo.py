"""The GPU facts of a copy run: a probe that cannot read something gives None, and only
for what the probe can raise (NVML's errors, torch's CUDA errors); a bug still raises."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest
import torch

from gpulane.transfers import gpuinfo


def test_no_driver_no_nvml() -> None:
    """This machine has nvidia-ml-py but no driver: NVML's own error, read as none."""
    with pytest.raises(pynvml.NVMLError):
        pynvml.nvmlInit()
    assert gpuinfo._nvml() is None
    assert gpuinfo.nvml_errors() == (pynvml.NVMLError,)


def test_torch_without_the_gpu() -> None:
    """torch here has no CUDA: no bus id, no model, the GPU named by its index."""
    assert gpuinfo.bus_id_of(0, torch, None) is None
    (info,) = gpuinfo.describe_gpus([0], torch, None, None)
    assert (info.name, info.bus_id, info.model, info.extra) == (
        "GPU0",
        None,
        None,
        {"cuda_device": 0},
    )
    assert "torch" in gpuinfo.versions(torch, None)


class StandInNvml:
    """NVML's interface whose every call raises ``error``."""

    NVMLError = pynvml.NVMLError
    NVML_FEATURE_ENABLED = 1

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def call(*_: Any) -> Any:
            raise self.error

        return call


def test_nvml_errors_are_none_and_bugs_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    bus = "0000:19:00.0"
    unsupported = StandInNvml(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED))
    monkeypatch.setattr(gpuinfo, "_nvml", lambda: unsupported)
    assert gpuinfo.busy_pcie_link(bus) is None
    assert gpuinfo.nvml_nvlinks(bus, "0000:1a:00.0") is None
    assert "driver" not in gpuinfo.versions(torch, None)
    broken = StandInNvml(TypeError("a bug, not a missing GPU"))
    monkeypatch.setattr(gpuinfo, "_nvml", lambda: broken)
    with pytest.raises(TypeError, match="a bug"):
        gpuinfo.busy_pcie_link(bus)
    with pytest.raises(TypeError, match="a bug"):
        gpuinfo.nvml_nvlinks(bus, "0000:1a:00.0")
