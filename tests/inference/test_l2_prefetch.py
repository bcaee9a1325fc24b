"""The decode step's L2 prefetches (gpulane.inference.l2_prefetch): how many bytes, in which
instructions, where in the step, the values unchanged, the kernel assembled for sm_90, and
the settings checked before any rank. The speed is a GPU's: benchmarks/inference."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from omegaconf import OmegaConf

from gpulane.inference.fused import Fused
from gpulane.inference.l2_prefetch import CHUNK, L2Prefetch, chunks, prefetch_bytes, supported
from gpulane.inference.model import Comm, Init, Stage, StepInput
from gpulane.inference.shapes import shape_from_config
from gpulane.inference.sharding import rank_slices, stage_layers
from tests.helpers import gpulane
from tests.inference.test_fused import logits

CONF = Path(__file__).resolve().parents[2] / "gpulane" / "conf" / "model"


@given(st.integers(0, 1 << 34), st.integers(-5, 1 << 34))
def test_prefetch_bytes_are_the_head_in_granules(nbytes: int, budget: int) -> None:
    got = prefetch_bytes(nbytes, budget)
    assert got % 16 == 0 and 0 <= got <= max(0, min(nbytes, budget))
    assert max(0, min(nbytes, budget)) - got < 16


@given(st.integers(0, 1 << 30).map(lambda n: n * 16), st.sampled_from([16, 4096, CHUNK, 65536]))
def test_chunks_cover_the_bytes_exactly(nbytes: int, chunk: int) -> None:
    n, last = chunks(nbytes, chunk)
    if nbytes == 0:
        assert (n, last) == (0, 0)
        return
    assert (n - 1) * chunk + last == nbytes
    assert 0 < last <= chunk and last % 16 == 0


def stage_of(model: str, stage: int = 0, stages: int = 1) -> Stage:
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / f"{model}.yaml"))
    shape = shape_from_config(cfg)  # type: ignore[arg-type]
    layers = stage_layers(shape.num_layers, stages)[stage]
    return Stage(
        shape, rank_slices(shape, 1), layers, stage == 0, stage == stages - 1,
        Comm(None, None, 1, False), Init(torch.device("cpu"), torch.float32, 0), 64,
        fused=Fused(False),
    )  # fmt: skip


def one_step(stage: Stage, attention: str, prefetch: L2Prefetch | None) -> None:
    n, clen = 2, 64
    stage.allocate_cache(n, clen)
    pos = torch.tensor([5])
    mask = torch.zeros(n, 1, 1, clen)
    step = StepInput(slice(0, n), 1, pos, mask, attention, prefetch=prefetch)
    with torch.inference_mode():
        if stage.first:
            stage.forward(torch.tensor([1, 2]), None, step)
        else:
            h = stage.shape.hidden_size
            stage.forward(torch.randn(n, h), torch.randn(n, h), step)


def nbytes(w: torch.Tensor | None) -> int:
    assert w is not None
    return w.numel() * w.element_size()


def want_bytes(w: torch.Tensor | None, budget: int) -> int:
    return min(nbytes(w), budget) // 16 * 16


@pytest.mark.parametrize("attention", ["math", "bmm"])
def test_each_weight_is_prefetched_once_where_its_window_opens(attention: str) -> None:
    stage = stage_of("tiny")
    budget = 40000  # more than w_o (16 KiB) and the cache (32 KiB), less than gate/up
    pf = L2Prefetch(budget)
    one_step(stage, attention, pf)
    want: list[tuple[str, int]] = [("0.w_qkv", want_bytes(stage.layers[0].w_qkv, budget))]
    for i, layer in enumerate(stage.layers):
        if attention != "bmm":  # bmm: o_proj sits inside the attention's compiled function
            want.append((f"{i}.w_o", nbytes(layer.w_o)))
        want += [
            (f"{i}.w_gate_up", budget // 16 * 16),
            (f"{i}.w_down", nbytes(layer.w_down)),
            (f"{i}.next", want_bytes(layer.next_weight, budget)),
        ]
    assert pf.log == want
    assert nbytes(stage.layers[0].w_o) < budget < nbytes(stage.layers[0].w_gate_up)
    # the last layer's next weight is the LM head; the others', the next layer's QKV
    assert stage.layers[-1].next_weight is stage.lm_head
    assert stage.layers[0].next_weight is stage.layers[1].w_qkv


def test_attention_that_streams_its_cache_gets_no_prefetch_beside_it() -> None:
    """A cache of 32 KiB (2 sequences x 2 KV heads x 64 positions x 16 x fp32, k and v)
    against a budget under it: attention is DRAM-bound, o_proj's weight is not fetched."""
    stage = stage_of("tiny")
    pf = L2Prefetch(20000)
    one_step(stage, "math", pf)
    names = [name for name, _ in pf.log]
    assert not [n for n in names if n.endswith("w_o")]
    assert names[:4] == ["0.w_qkv", "0.w_gate_up", "0.w_down", "0.next"]


def test_only_the_chosen_windows_are_prefetched() -> None:
    stage = stage_of("tiny")
    pf = L2Prefetch(1 << 20, windows=frozenset({"qkv", "gate_up"}))
    one_step(stage, "math", pf)
    assert [n for n, _ in pf.log] == ["0.w_qkv"] + [
        f"{i}.{w}" for i in range(4) for w in ("w_gate_up", "next")
    ]
    assert pf.uses("qkv") and not pf.uses("down") and L2Prefetch(1).uses("down")


def test_a_prefill_prefetches_nothing_and_moe_layers_skip_their_mlp() -> None:
    stage = stage_of("tiny-moe")
    pf = L2Prefetch(1 << 30)
    stage.allocate_cache(1, 64)
    with torch.inference_mode():
        stage.forward(torch.tensor([1, 2, 3]), None, StepInput(slice(0, 1), 3, prefetch=pf))
    assert pf.log == []
    one_step(stage, "math", pf)
    names = [name for name, _ in pf.log]
    dense = [i for i, layer in enumerate(stage.layers) if not layer.moe]
    assert dense == [0]
    assert names == ["0.w_qkv", "0.w_o", "0.w_gate_up", "0.w_down", "0.next"] + [
        f"{i}.{w}" for i in (1, 2) for w in ("w_o", "next")
    ]
    assert dict(pf.log)["0.w_down"] == nbytes(stage.layers[0].w_down)  # under the budget


def test_pipeline_stages_prefetch_their_own_layers() -> None:
    first, last = stage_of("tiny", 0, 2), stage_of("tiny", 1, 2)
    a, b = L2Prefetch(1 << 30), L2Prefetch(1 << 30)
    one_step(first, "math", a)
    one_step(last, "math", b)
    # the first stage's last layer hands over to the next stage: nothing after its down
    assert first.layers[-1].next_weight is None and "1.next" not in dict(a.log)
    assert a.log[0][0] == "0.w_qkv" and b.log[0][0] == "2.w_qkv"
    assert dict(b.log)["3.next"] == nbytes(last.lm_head)


@pytest.mark.parametrize("model", ["tiny", "tiny-moe"])
@pytest.mark.parametrize("windows", [None, frozenset({"qkv", "o"})])
def test_the_prefetching_step_gives_the_same_logits(
    model: str, windows: frozenset[str] | None
) -> None:
    """With down's window the MLP runs as two functions (mlp_in, mlp_out): same values."""
    want = logits(model, torch.float32, Fused(False), "math")
    pf = L2Prefetch(1 << 20, windows=windows)
    got = logits(model, torch.float32, Fused(False), "math", prefetch=pf)
    assert pf.log  # it ran
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_the_kernel_assembles_for_sm90() -> None:
    """triton lowers the kernel to PTX with the bulk prefetch, and ptxas (bundled with
    triton) assembles it for sm_90: the GPU runs what this compiled."""
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from gpulane.inference.l2_prefetch import LAUNCHES, _kernel

    sig = {"base": "i64", "n_chunks": "i32", "last_bytes": "i32", "CHUNK": "constexpr",
           "PER": "constexpr", "BULK": "constexpr"}  # fmt: skip
    for how in LAUNCHES.values():
        consts = {"CHUNK": how.chunk, "PER": how.per, "BULK": how.bulk}
        k = triton_compile(ASTSource(_kernel(), sig, constexprs=consts),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": how.warps})  # fmt: skip
        want = "cp.async.bulk.prefetch.L2.global" if how.bulk else "prefetch.global.L2 "
        assert want in k.asm["ptx"], how.name
        assert len(k.asm["cubin"]) > 1000


def test_a_cpu_cannot_prefetch() -> None:
    assert supported(torch.device("cpu")) == "l2_prefetch needs a GPU"


def test_settings_are_checked_before_any_rank(tmp_path: Path) -> None:
    for args, message in (
        (["l2_prefetch=-1"], "l2_prefetch: expected a whole number >= 0, got -1"),
        (["l2_prefetch=16"], "l2_prefetch=16 needs a GPU; use l2_prefetch=0 on CPUs"),
    ):
        out = gpulane(
            "tokens", "model=tiny", "device=cpu", *args, f"results_dir={tmp_path}", cwd=tmp_path
        )
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip() == f"gpulane: error: {message}"
    assert not list(tmp_path.iterdir())
