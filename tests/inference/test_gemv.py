"""decode_products=auto: the split-K product kernel (gpulane.inference.gemv) against
F.linear on CPUs through triton's interpreter (TRITON_INTERPRET=1, in a child process: it
is read at import), the tiny model's logits through it, the choice rule, and the setting
checked before any rank. The choice's timings are a GPU's: benchmarks/inference."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulane.inference.products import MARGIN, Products, choose
from tests.helpers import gpulane

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from gpulane.inference import gemv as G
from gpulane.inference.fused import Fused
from gpulane.inference.memory import cache_len
from gpulane.inference.model import Comm, Init, Stage, StepInput
from gpulane.inference.products import Products
from gpulane.inference.shapes import shape_from_config
from gpulane.inference.sharding import rank_slices

assert G.INTERPRETED
g = torch.Generator().manual_seed(0)
# rows 1 (CUDA-core path) and 3, 16 (tl.dot); N and K off the block sizes; 1 to 4 pieces
for m, n, k, split, bias in [(1, 40, 100, 1, False), (1, 40, 100, 3, True), (3, 50, 70, 2, True),
                             (16, 33, 96, 4, False), (2, 16, 32, 1, True)]:
    x = torch.randn(m, k, generator=g)
    w = torch.randn(n, k, generator=g)
    b = torch.randn(n, generator=g) if bias else None
    for _ in range(2):  # the tickets are back to zero after a call: the second is right too
        got = G.gemv(x, w, b, split_k=split)
        torch.testing.assert_close(got, F.linear(x, w, b), rtol=1e-4, atol=1e-4)
    assert int(G._TICKETS["cpu"].abs().sum()) == 0
    print("gemv", m, n, k, split)
try:
    G.gemv(torch.randn(17, 8), torch.randn(4, 8))
except ValueError as e:
    print("refused:", e)

class Always(Products):  # the choice a GPU's timing could make, forced: every product split-K
    def pick(self, m, w, bias):
        return "gemv"

shape = shape_from_config(OmegaConf.to_container(OmegaConf.load("gpulane/conf/model/tiny.yaml")))
B, I, O = 3, 12, 4
clen = cache_len(I, O)
def run(products):
    st = Stage(shape, rank_slices(shape, 1), range(shape.num_layers), True, True,
               Comm(None, None, 1, False), Init(torch.device("cpu"), torch.float32, 0), clen,
               Fused(False))
    st.allocate_cache(B, clen)
    ids = torch.randint(0, shape.vocab_size, (B, I), generator=torch.Generator().manual_seed(0))
    x, r = st.forward(ids.reshape(-1), None, StepInput(slice(0, B), I))
    tokens = st.logits(x, r, I).argmax(-1)
    pos = torch.tensor([I])
    mask = torch.full((B, 1, 1, clen), float("-inf"))
    mask[..., :I] = 0
    out = []
    for _ in range(O - 1):
        mask.index_fill_(3, pos, 0)
        step = StepInput(slice(0, B), 1, pos, mask, "fused", (pos + 1).expand(B), products)
        x, r = st.forward(tokens, None, step)
        out.append(st.logits(x, r, 1))
        tokens = out[-1].argmax(-1)
        pos += 1
    return out
with torch.inference_mode():
    for a, b in zip(run(Always("auto")), run(None), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
print("model ok")
"""


def test_split_k_products_are_linear_and_the_model_gives_the_same_logits() -> None:
    if importlib.util.find_spec("triton") is None:
        if os.environ.get("CI"):
            pytest.fail("triton is not installed: it is in the test extras")
        pytest.skip("triton not installed here; CI installs it")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert sum(line.startswith("gemv ") for line in out.stdout.splitlines()) == 5
    assert "refused: gemv takes at most 16 rows, got 17" in out.stdout
    assert "model ok" in out.stdout


def test_the_split_k_kernel_is_chosen_only_when_clearly_faster() -> None:
    assert choose(10.0, 9.0) == "gemv"
    assert choose(10.0, 10.0 * MARGIN) == "cublas"  # a tie within the margin stays cuBLAS
    assert choose(5.0, 6.0) == "cublas"


def test_cublas_unless_auto_on_a_gpu() -> None:
    import torch

    w = torch.zeros(8, 8)
    assert Products("cublas").pick(1, w, None) == "cublas"
    assert Products("auto").pick(1, w, None) == "cublas"  # a CPU tensor: nothing to time
    p = Products("auto")
    p.chosen[(1, 1536, 4096, False)] = "gemv"
    p.timings_us["1x1536x4096"] = {"cublas": 9.1, "gemv": 5.2}
    assert p.describe() == {
        "decode_products": "auto",
        "products_chosen": {"1x1536x4096": "gemv"},
        "products_timings_us": {"1x1536x4096": {"cublas": 9.1, "gemv": 5.2}},
    }


def test_the_setting_is_checked_before_any_rank(tmp_path: Path) -> None:
    for arg, message in (
        ("decode_products=fast", "decode_products: expected one of cublas, auto, got 'fast'"),
        ("decode_products=auto", "decode_products=auto times kernels on a GPU; use cublas on CPUs"),
    ):
        out = gpulane(
            "tokens", "model=tiny", "device=cpu", arg, f"results_dir={tmp_path}", cwd=tmp_path
        )
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip() == f"gpulane: error: {message}"
    assert not list(tmp_path.iterdir())
