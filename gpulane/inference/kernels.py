"""Which attention kernels a decode step may use (torch imported only when used)."""

from __future__ import annotations

import contextlib
from typing import Any

# name -> the scaled_dot_product_attention kernels allowed (bmm: no SDPA at all, three
# kernels of gpulane's own; any: torch's own choice)
ATTENTION_BACKENDS: dict[str, list[str] | None] = {
    "bmm": [],
    "triton": [],  # gpulane.inference.triton_attention: split-K flash decoding, GPUs
    # gpulane.inference.fused_attention: the same in one kernel, with the rotary and the
    # cache write inside in the compiled step, GPUs
    "fused": [],
    "efficient": ["EFFICIENT_ATTENTION", "MATH"],
    "cudnn": ["CUDNN_ATTENTION", "MATH"],
    "math": ["MATH"],
    "any": None,
}


# the choices that are triton kernels of gpulane's own: they take the live lengths
TRITON_KERNELS = ("triton", "fused")

# torch.compile modes that leave CUDA graphs to gpulane's own capture (gpulane.inference.fused)
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")


def triton_attention_fits(head_dim: int) -> bool:
    """Whether decode_attention=triton or fused takes this head dimension (a power of two >= 16:
    tl.arange and tl.dot want it)."""
    return head_dim >= 16 and head_dim & (head_dim - 1) == 0


def attention_kernels(name: str) -> Any:
    """A context in which scaled_dot_product_attention uses only the named kernels.

    Why: a decode step attends with a handful of query rows over the whole cache, where
    torch's default choice on H200 (cuDNN) takes 17 us per layer (profile_decode.py)."""
    names = ATTENTION_BACKENDS[name]  # checked by the command before any rank starts
    if not names:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, n) for n in names])
