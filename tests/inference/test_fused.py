"""The fused path (gpulane.inference.fused) against the eager model on the same weights:
the same arithmetic as plain Python (fp32, to rounding), and compiled by inductor on CPU
(bf16, within bf16's rounding). The split-rank composition is in test_tp_pp_gloo."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from gpulane.inference.fused import Fused
from gpulane.inference.memory import cache_len
from gpulane.inference.model import Comm, Init, Stage, StepInput
from gpulane.inference.shapes import shape_from_config
from gpulane.inference.sharding import rank_slices
from gpulane.inference.table import TokensView
from tests.helpers import gpulane

CONF = Path(__file__).resolve().parents[2] / "gpulane" / "conf" / "model"
BATCH, INPUT_LEN, OUTPUT_LEN = 3, 12, 4


def logits(
    model: str, dtype: torch.dtype, fused: Fused | None, attention: str,
    batch: int = BATCH, input_len: int = INPUT_LEN,
) -> list[torch.Tensor]:  # fmt: skip
    """Prefill and greedy decode of the whole model in this process; every step's logits."""
    BATCH, INPUT_LEN = batch, input_len  # the module's defaults, overridden
    shape = shape_from_config(OmegaConf.to_container(OmegaConf.load(CONF / f"{model}.yaml")))  # type: ignore[arg-type]
    clen = cache_len(INPUT_LEN, OUTPUT_LEN)
    comm = Comm(None, None, 1, False)
    init = Init(torch.device("cpu"), dtype, 0)
    stage = Stage(
        shape, rank_slices(shape, 1), range(shape.num_layers), True, True, comm, init, clen,
        fused=fused,
    )  # fmt: skip
    stage.allocate_cache(BATCH, clen)
    ids = torch.randint(
        0, shape.vocab_size, (BATCH, INPUT_LEN), generator=torch.Generator().manual_seed(0)
    )
    rows = slice(0, BATCH)
    out = []
    with torch.inference_mode():
        x, r = stage.forward(ids.reshape(-1), None, StepInput(rows, INPUT_LEN))
        out.append(stage.logits(x, r, INPUT_LEN))
        tokens = out[-1].argmax(-1)
        pos = torch.tensor([INPUT_LEN])
        mask = torch.full((BATCH, 1, 1, clen), float("-inf"), dtype=dtype)
        mask[..., :INPUT_LEN] = 0
        for _ in range(OUTPUT_LEN - 1):
            mask.index_fill_(3, pos, 0)
            x, r = stage.forward(tokens, None, StepInput(rows, 1, pos, mask, attention))
            out.append(stage.logits(x, r, 1))
            tokens = out[-1].argmax(-1)
            pos += 1
    return out


@pytest.mark.parametrize("model", ["tiny", "tiny-moe"])
@pytest.mark.parametrize("attention", ["bmm", "math"])
def test_fused_functions_are_the_eager_arithmetic(model: str, attention: str) -> None:
    want = logits(model, torch.float32, None, attention)
    got = logits(model, torch.float32, Fused(False), attention)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_compiled_model_gives_the_eager_logits_in_bf16() -> None:
    fused = Fused(True)
    got = logits("tiny", torch.bfloat16, fused, "bmm")
    want = logits("tiny", torch.bfloat16, None, "bmm")
    assert fused.compiled and fused.error is None and fused.compile_s > 0
    for a, b in zip(got, want, strict=True):
        # bf16 keeps 8 bits: fused kernels round once where eager rounds after each op
        torch.testing.assert_close(a, b, rtol=2e-2, atol=8e-2)
    before = fused.compile_s
    logits("tiny", torch.bfloat16, fused, "bmm")  # the same shapes: nothing compiles again
    assert fused.compile_s == before


def test_compile_settings_are_checked_before_any_rank(tmp_path: Path) -> None:
    for arg, message in (
        ("compile=maybe", "compile: expected auto, true or false, got 'maybe'"),
        ("compile_mode=reduce-overhead", "compile_mode: expected one of default, "
         "max-autotune-no-cudagraphs, got 'reduce-overhead'"),
    ):  # fmt: skip
        out = gpulane(
            "tokens", "model=tiny", "device=cpu", arg, f"results_dir={tmp_path}", cwd=tmp_path
        )
        assert out.returncode == 2
        assert out.stderr.strip() == f"gpulane: error: {message}"
    assert not list(tmp_path.iterdir())


def test_compiling_note_becomes_the_progress_state() -> None:
    view = TokensView(2)
    assert view.state_of_note(
        "# compiling… decode b1 in512 out128 (torch.compile, once per shape)"
    ) == ("compiling… decode b1 in512 out128")
    assert view.state_of_note("# something else") is None


def test_new_prompt_shapes_reuse_the_prefill_compilation() -> None:
    """Prefill functions turn dynamic at their second shape, so a third prompt length
    compiles only the decode step's functions (static, one per shape); every shape still
    gives the eager logits."""
    from torch._dynamo.utils import counters

    fused = Fused(True)
    graphs = []
    for batch, input_len in ((3, 12), (2, 20), (4, 9)):
        before = counters["stats"]["unique_graphs"]
        got = logits("tiny", torch.float32, fused, "bmm", batch, input_len)
        graphs.append(counters["stats"]["unique_graphs"] - before)
        want = logits("tiny", torch.float32, None, "bmm", batch, input_len)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert graphs[2] == 2, graphs  # attn_block_decode and mlp_block at the new batch
