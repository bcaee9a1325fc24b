"""The short calibration runs of a packaged model cut to fewer layers
(`advise model=qwen2.5-72b model.num_layers=8`): named by the packaged name, as run_gpu4.sh
relies on."""

from __future__ import annotations

from gpulane.planning import calibration
from tests.planning.common import H200, model


def test_a_cut_packaged_model_still_calibrates() -> None:
    shape = model("qwen2.5-72b").with_layers(8)
    p = calibration.plan(shape, {"name": "qwen2.5-72b"}, 4, H200.memory_gib, [4, 32],
                         [512, 2048], 2, "advise-measured")  # fmt: skip
    assert p is not None and p.layers == 8 and p.tps == (1, 2)
    (tp1, tp2) = p.commands()
    assert tp1.startswith("gpulane tokens model=qwen2.5-72b layers=8 tp=1 pp=1 batch=4,32")
    assert "input_len=512,2048" in tp2 and "tp=2" in tp2
    # a shape changed in more than its layers is not the packaged model: no short name
    other = model("qwen2.5-72b").with_layers(8)
    other = other.__class__(**{**other.to_dict(), "hidden_size": 4096})
    assert calibration.model_args(other, {}) is None
