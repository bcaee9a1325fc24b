"""Bytes from the shapes torch.profiler records (gpulane.analysis.trace.aten)."""

from __future__ import annotations

from gpulane.analysis.trace.aten import tensor_bytes


def test_tensor_bytes() -> None:
    assert tensor_bytes([1024, 1024], "float") == 4 << 20
    assert tensor_bytes([3, 5], "c10::BFloat16") == 30
    assert tensor_bytes([], "double") == 8
    assert tensor_bytes([2, 2], "mystery") is None
    assert tensor_bytes("2x2", "float") is None
