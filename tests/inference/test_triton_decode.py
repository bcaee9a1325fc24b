"""decode_kernels=gemv (gpulane.inference.triton_gemv and triton_decode) on CPUs through
triton's interpreter (TRITON_INTERPRET=1, read at import: so in child processes):

- the product kernel with each prologue (none, residual add + RMSNorm, SiLU x up) and a
  bias, at 1, 5 and 16 rows and odd N and K, against torch in fp64;
- rotary + cache write, and attention in one kernel (one piece, and several pieces
  merged by the last program), against the textbook softmax attention;
- the whole tiny model's decode steps in six kernels a layer against the eager model,
  in one process and split over two gloo ranks (TP=2) through `gpulane tokens`.

fp32 and fp16 only: the interpreter's tl.dot is wrong for bf16 (test_triton_attention)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import gpulane, rows_of
from tests.inference.test_tp_pp_gloo import (
    BATCH,
    INPUT_LEN,
    OUTPUT_LEN,
    launched,
    reference,
    same_logits,
)

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from gpulane.inference.fused import Fused
from gpulane.inference.model import _rope, rope_tables
from gpulane.inference.triton_decode import DecodeKernels, rope_cache
from gpulane.inference.triton_gemv import gemv
from gpulane.inference.triton_attention import split_count
from tests.inference.test_fused import logits

def close(got, want, tol, what):
    err = (got.double() - want.double()).abs().max().item()
    assert err < tol, (what, err)

for m, n, k, dt, tol in [
    (1, 37, 72, torch.float32, 1e-4), (5, 100, 130, torch.float16, 3e-2),
    (16, 64, 64, torch.float32, 1e-4),
]:
    g = torch.Generator().manual_seed(m * n)
    x, r = torch.randn(m, k, generator=g).to(dt), torch.randn(m, k, generator=g).to(dt)
    w = (torch.randn(n, k, generator=g) / k**0.5).to(dt)
    b = torch.randn(n, generator=g).to(dt)
    nw = (1 + 0.1 * torch.randn(k, generator=g)).to(dt)
    out, none = gemv(x, w)
    assert none is None and out.dtype == dt and out.shape == (m, n)
    close(out, F.linear(x.double(), w.double()), tol, ("none", m, n, k))
    out, res = gemv(x, w, b, "norm", r, nw)
    torch.testing.assert_close(res, x + r)  # the new residual, rounded as eager rounds it
    h = F.rms_norm((x + r).double(), (k,), nw.double(), 1e-5)
    close(out, F.linear(h, w.double(), b.double()), tol, ("norm", m, n, k))
    out, res = gemv(x, w, None, "norm", None, nw)  # the first layer: no residual yet
    torch.testing.assert_close(res, x)
    close(out, F.linear(F.rms_norm(x.double(), (k,), nw.double(), 1e-5), w.double()), tol, "first")
    gu = torch.randn(m, 2 * k, generator=g).to(dt)
    out, _ = gemv(gu, w, None, "silu")
    act = F.silu(gu[:, :k].double()) * gu[:, k:].double()
    close(out, F.linear(act, w.double()), tol, ("silu", m, n, k))
    print("gemv", m, n, k, str(dt))

def textbook(q, k, v, length):
    n, kvh, g, d = q.shape
    s = torch.einsum("nhgd,nhsd->nhgs", q.double(), k[:, :, :length].double()) / d**0.5
    return torch.einsum("nhgs,nhsd->nhgd", torch.softmax(s, -1), v[:, :, :length].double())

kernels = DecodeKernels(None)
# (sequences, kv heads, group, cache length, position, head dim): several pieces, pieces
# past the position, one piece, a group of 1; twice each, the count must reset itself
for n, kvh, g, clen, pos, d in [(2, 3, 4, 640, 300, 32), (1, 2, 8, 200, 199, 16),
                                (3, 2, 1, 64, 40, 16), (2, 4, 2, 130, 5, 64)]:
    gen = torch.Generator().manual_seed(clen)
    heads = kvh * g
    qkv = torch.randn(n, (heads + 2 * kvh) * d, generator=gen)
    full = torch.randn(2, n + 1, kvh, clen, d, generator=gen)
    cache = full[:, 1:]  # a view that skips a sequence, as a micro-batch's rows are
    cos, sin = rope_tables(10000.0, d, clen, torch.device("cpu"), torch.float32)
    p = torch.tensor([pos])
    q = rope_cache(qkv, cos[pos : pos + 1], sin[pos : pos + 1], cache, p, heads, kvh)
    want = _rope(qkv.view(n, 1, heads + 2 * kvh, d)[:, :, : heads + kvh], cos[pos:pos + 1], sin[pos:pos + 1])
    torch.testing.assert_close(q, want[:, 0, :heads].reshape(n, -1))
    torch.testing.assert_close(cache[0, :, :, pos], want[:, 0, heads:])
    torch.testing.assert_close(cache[1, :, :, pos], qkv.view(n, -1, d)[:, heads + kvh :])
    for _ in range(2):
        got = kernels.attention(q, cache, p).view(n, kvh, g, d)
        close(got, textbook(q.view(n, kvh, g, d), cache[0], cache[1], pos + 1), 1e-5, "attention")
    assert all(int(c.sum()) == 0 for c in kernels._counts.values())
    print("attention", n, kvh, g, clen, d, "pieces", split_count(n, kvh, clen))

# the tiny model's decode steps in six kernels a layer give the eager model's logits
fused = Fused(False, decode_kernels="gemv")
for dt, tol in ((torch.float32, 1e-4), (torch.float16, 2e-2)):
    got = logits("tiny", dt, fused, "bmm")
    want = logits("tiny", dt, None, "bmm")
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.float(), b.float(), rtol=tol, atol=tol)
print("model", fused.describe())
assert fused.decode.error is None
assert set(fused.decode.choice.values()) == {"triton"} and fused.decode.kernels_per_layer() == 6
"""


def interpreted() -> dict[str, str]:
    if importlib.util.find_spec("triton") is None:
        if os.environ.get("CI"):
            pytest.fail("triton is not installed: it is in the test extras")
        pytest.skip("triton not installed here (pip install triton); CI installs it")
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path}


def test_decode_kernels_are_the_eager_arithmetic() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=interpreted(), capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    firsts = [line.split()[0] for line in out.stdout.splitlines()]
    assert firsts == ["gemv"] * 3 + ["attention"] * 4 + ["model"], out.stdout


def test_two_gloo_ranks_decode_in_six_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TP=2 through the launcher: each rank's slices in the six kernels, the all-reduces
    between them, the unsplit model's logits; the rows say which kernels ran."""
    interpreted()
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the CLI and its ranks inherit it
    run, dump = launched(tmp_path, "tiny", "tp=2", "pp=1", "decode_kernels=gemv")
    same_logits(dump, reference("tiny", BATCH, INPUT_LEN, OUTPUT_LEN))
    decode = rows_of(run)[1]["extra"]
    assert decode["decode_kernels"] == "gemv" and decode["compile"] is False
    assert decode["kernels_per_layer"] == 6
    assert decode["gemv_choice"] == {
        f"{op} {BATCH}x{n}x{k}": "triton"
        for op, n, k in (("qkv", 64, 64), ("o", 64, 32), ("gate_up", 128, 64), ("down", 64, 64))
    }


def test_decode_kernels_setting_is_checked_before_any_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    for arg, message in (
        ("decode_kernels=fast", "decode_kernels: expected one of compiled, gemv, got 'fast'"),
        ("decode_kernels=gemv", "decode_kernels=gemv needs a GPU (or TRITON_INTERPRET=1, "
         "triton's slow interpreter); use decode_kernels=compiled on CPUs"),
    ):  # fmt: skip
        out = gpulane(
            "tokens", "model=tiny", "device=cpu", arg, f"results_dir={tmp_path}", cwd=tmp_path
        )
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.strip() == f"gpulane: error: {message}"
    assert not list(tmp_path.iterdir())


def test_a_failing_kernel_leaves_the_compiled_path_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel that fails (outside a capture) turns the run back to the compiled path,
    with the same logits, and the rows say why instead of claiming six kernels."""
    pytest.importorskip("triton")
    import torch

    from gpulane.inference import triton_decode
    from gpulane.inference.fused import Fused
    from tests.inference.test_fused import logits

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no kernel for this GPU")

    monkeypatch.setattr(triton_decode, "gemv", broken)
    fused = Fused(False, decode_kernels="gemv")
    got = logits("tiny", torch.float32, fused, "bmm")
    want = logits("tiny", torch.float32, None, "bmm")
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    said = fused.describe()
    assert said["gemv_error"] == "RuntimeError: no kernel for this GPU"
    assert said["kernels_per_layer"] is None and said["decode_kernels"] == "gemv"
