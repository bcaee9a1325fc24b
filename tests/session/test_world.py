"""How many GPUs the front sees: on a host without a GPU driver, 0 without importing torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpulane.session.world import DRIVER_PATHS, gpu_driver_present, local_gpus


def test_driver_present_when_any_of_its_paths_is(tmp_path: Path) -> None:
    ctl = tmp_path / "nvidiactl"
    assert not gpu_driver_present((str(ctl), str(tmp_path / "kfd")))
    ctl.touch()
    assert gpu_driver_present((str(tmp_path / "kfd"), str(ctl)))


def test_cpu_host_counts_no_gpu_without_torch() -> None:
    # This test's machine (CI: no GPU) has none of the driver paths; a GPU host skips
    # nothing: there torch is asked and must agree with the driver being present.
    code = (
        "import sys; from gpulane.session.world import local_gpus, gpu_driver_present;"
        "n = local_gpus(); print(n, gpu_driver_present(), 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    n, driver, torch_imported = int(out[0]), out[1] == "True", out[2] == "True"
    if not driver:
        assert (n, torch_imported) == (0, False)
    else:
        assert torch_imported
        assert n == local_gpus()
    assert any(p.startswith("/dev/") for p in DRIVER_PATHS)
