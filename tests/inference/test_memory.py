"""Memory estimates and the refusal that names what fits."""

from __future__ import annotations

import pytest

from gpulane.errors import InputError
from gpulane.inference.memory import (
    GiB,
    cache_len,
    check_fits,
    estimate,
    kv_cache_bytes,
    largest_batch,
    largest_layers,
)
from tests.inference.test_shapes import shipped


def test_kv_cache_of_llama_8b() -> None:
    shape = shipped("llama3-8b")
    # 32 layers x (K and V) x 8 heads x 128 x 2 bytes = 128 KiB per token
    per_token = 32 * 2 * 8 * 128 * 2
    assert kv_cache_bytes(shape, 1, 1, 1, 2048, 128, 2) == per_token * cache_len(2048, 128)
    assert kv_cache_bytes(shape, 2, 1, 8, 512, 128, 2) == per_token // 2 * 8 * 640
    assert kv_cache_bytes(shape, 1, 2, 8, 512, 128, 2) == per_token // 2 * 8 * 640


def test_weights_per_gpu() -> None:
    est = estimate(shipped("llama3-8b"), 1, 1, 1, 512, 128, 2)
    assert est.weights / 1e9 == pytest.approx(16.06, rel=0.01)
    est2 = estimate(shipped("llama3-8b"), 2, 1, 1, 512, 128, 2)
    assert est2.weights == pytest.approx(est.weights / 2, rel=0.001)


def test_70b_does_not_fit_one_h200_and_says_what_does() -> None:
    shape = shipped("llama3-70b")
    h200 = int(139 * GiB)
    with pytest.raises(InputError) as err:
        check_fits(shape, 80, 1, 1, 8, 2048, 128, 2, h200, "the GPU")
    text = str(err.value)
    assert "needs" in text and "weights 131" in text
    n = largest_layers(shape, 1, 1, 8, 2048, 128, 2, h200)
    assert f"layers={n} (of 80" in text
    assert 60 < n < 80
    small = largest_batch(shape, 1, 1, 2048, 128, 2, h200)
    assert 0 < small < 8 and f"batch<={small} " in text
    # two GPUs hold it, with room for a large batch
    b = largest_batch(shape, 2, 1, 2048, 128, 2, h200)
    assert b > 32
    check_fits(shape, 80, 2, 1, b, 2048, 128, 2, h200, "the GPU")
    with pytest.raises(InputError, match=f"batch<={b}"):
        check_fits(shape, 80, 2, 1, b + 1, 2048, 128, 2, h200, "the GPU")
