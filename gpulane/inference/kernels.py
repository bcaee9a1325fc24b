"""Which attention kernels a decode step may use (torch imported only when used)."""

from __future__ import annotations

import contextlib
from typing import Any

# name -> the scaled_dot_product_attention kernels allowed (bmm: no SDPA at all, three
# kernels of gpulane's own; any: torch's own choice)
ATTENTION_BACKENDS: dict[str, list[str] | None] = {
    "bmm": [],
    "efficient": ["EFFICIENT_ATTENTION", "MATH"],
    "cudnn": ["CUDNN_ATTENTION", "MATH"],
    "math": ["MATH"],
    "any": None,
}


# torch.compile modes that leave CUDA graphs to gpulane's own capture (gpulane.inference.fused)
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")


def attention_kernels(name: str) -> Any:
    """A context in which scaled_dot_product_attention uses only the named kernels.

    Why: a decode step attends with a handful of query rows over the whole cache, where
    torch's default choice on H200 (cuDNN) takes 17 us per layer (profile_decode.py)."""
    names = ATTENTION_BACKENDS[name]  # checked by the command before any rank starts
    if not names:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, n) for n in names])
