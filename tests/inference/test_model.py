"""The model's pieces against their textbook forms (the TP/PP tests only compare the
model with itself)."""

from __future__ import annotations

from pathlib import Path

import torch

from gpulane.inference.attention import decode_attention
from gpulane.inference.kernels import ATTENTION_BACKENDS, TRITON_KERNELS, attention_kernels
from gpulane.inference.model import _rope, rope_tables
from tests.helpers import gpulane


def _rope_textbook(x: torch.Tensor, theta: float, positions: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = positions.double()[:, None] * inv[None, :]  # [seq, d/2]
    c, s = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = x[..., : d // 2].double(), x[..., d // 2 :].double()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def test_rope_matches_the_rotation_formula() -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 7, 5, 64, generator=gen)
    cos, sin = rope_tables(500000.0, 64, 20, torch.device("cpu"), torch.float32)
    got = _rope(x, cos[:7], sin[:7])
    want = _rope_textbook(x, 500000.0, torch.arange(7))
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)
    in_place = x.clone()
    _rope(in_place, cos[:7], sin[:7], out=in_place)  # as the model writes back into qkv
    torch.testing.assert_close(in_place, got)


def test_rope_at_chosen_positions_and_rotation_keeps_length() -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 1, 4, 128, generator=gen)
    cos, sin = rope_tables(10000.0, 128, 64, torch.device("cpu"), torch.float32)
    pos = torch.tensor([37])
    got = _rope(x, cos.index_select(0, pos), sin.index_select(0, pos))
    torch.testing.assert_close(got.double(), _rope_textbook(x, 10000.0, pos), atol=1e-5, rtol=0)
    # a rotation of each pair: the norm of every head vector is unchanged
    torch.testing.assert_close(got.norm(dim=-1), x.norm(dim=-1), atol=1e-4, rtol=1e-5)


def test_unknown_decode_attention_is_one_error_before_any_rank(tmp_path: Path) -> None:
    out = gpulane(
        "tokens",
        "model=tiny",
        "device=cpu",
        "decode_attention=flash",
        f"results_dir={tmp_path}",
        cwd=tmp_path,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "gpulane: error: decode_attention: expected one of bmm, triton, fused, efficient, cudnn, "
        "math, any, got 'flash'"
    )
    assert not list(tmp_path.iterdir())  # no run directory, no rank started


def test_every_decode_attention_gives_masked_softmax_attention() -> None:
    gen = torch.Generator().manual_seed(3)
    n, kvh, g, s, d = 2, 3, 4, 16, 32
    q = torch.randn(n, kvh, g, d, generator=gen)
    k = torch.randn(n, kvh, s, d, generator=gen)
    v = torch.randn(n, kvh, s, d, generator=gen)
    mask = torch.zeros(n, 1, 1, s)
    mask[0, ..., 9:] = float("-inf")  # sequence 0 has 9 live positions, sequence 1 all
    scores = torch.einsum("nhgd,nhsd->nhgs", q.double(), k.double()) / d**0.5
    want = torch.einsum("nhgs,nhsd->nhgd", torch.softmax(scores + mask.double(), -1), v.double())
    for name in ATTENTION_BACKENDS:  # the SDPA lists end in MATH, which CPUs have
        if name in TRITON_KERNELS:  # GPUs, or triton's interpreter: test_triton_attention.py
            continue
        got = decode_attention(q, k, v, mask, name)
        torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5, msg=name)
    with attention_kernels("math"):
        assert torch.backends.cuda.math_sdp_enabled()
        assert not torch.backends.cuda.mem_efficient_sdp_enabled()
