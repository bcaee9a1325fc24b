"""What the front sees of this host before any rank starts: how many GPUs torch can use,
and the path label between the first N of them."""

from __future__ import annotations

from pathlib import Path

# Where a GPU driver shows itself to a process: NVIDIA's control device and its /proc
# folder, ROCm's kernel driver (torch.cuda is HIP there), WSL's GPU paravirtualization.
# Without any of them torch.cuda finds no device, so the answer needs no torch.
DRIVER_PATHS = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/kfd", "/dev/dxg")


def gpu_driver_present(paths: tuple[str, ...] = DRIVER_PATHS) -> bool:
    """Whether any GPU driver is visible here. Asking torch costs ~2.5 CPU-s of imports
    (`benchmarks/ci/README.md`, session 6): on a CPU host every command paid it to learn 0."""
    return any(Path(p).exists() for p in paths)


def local_gpus() -> int:
    """How many GPUs torch can use here (0 without a GPU driver, without importing torch)."""
    if not gpu_driver_present():
        return 0
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def local_path_label(device: str, ranks: int) -> str | None:
    """The worst nvidia-smi label among GPUs 0..ranks-1; None on CPUs or when unknown."""
    if device != "cuda":
        return None
    try:
        from gpulane.topology.live import worst_path_for_gpus

        return worst_path_for_gpus(list(range(ranks)))
    except Exception:  # a probe that fails leaves the label unknown, never the run
        return None
