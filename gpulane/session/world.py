"""What the front sees of this host before any rank starts: how many GPUs torch can use,
and the path label between the first N of them."""

from __future__ import annotations


def local_gpus() -> int:
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
