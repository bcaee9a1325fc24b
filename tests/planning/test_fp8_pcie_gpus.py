"""fp8 as the advisor's dtype and the PCIe GPU models, on 1, 2, 4 and 8 GPU builds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpulane.errors import InputError
from gpulane.planning.inputs import advise_dtype_bytes


def advise(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gpulane", "advise", *args, "format=json"]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_fp8_is_one_byte_and_others_unchanged() -> None:
    assert advise_dtype_bytes("fp8") == 1
    assert advise_dtype_bytes("FP8_E4M3") == 1
    assert advise_dtype_bytes("bf16") == 2
    assert advise_dtype_bytes("fp32") == 4
    with pytest.raises(InputError, match="fp8, got 'int3'"):
        advise_dtype_bytes("int3")


def test_bad_dtype_one_error_line() -> None:
    out = advise("model=llama3-8b", "gpus=2", "gpu=L4", "what_if=pcie:4x16", "dtype=int3")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "gpulane: error: dtype: expected bf16, fp16, fp32 or fp8, got 'int3'"
    ]


@pytest.mark.parametrize(
    ("gpus", "gpu"), [(1, "RTX 4090"), (2, "RTX 3090"), (4, "L40S"), (8, "L4")]
)
def test_fp8_halves_weights_on_pcie_builds(gpus: int, gpu: str) -> None:
    common = ("model=llama3-8b", f"gpus={gpus}", f"gpu={gpu}", "what_if=pcie:4x16", "batch=1")
    runs = {}
    for dtype in ("bf16", "fp8"):
        out = advise(*common, f"dtype={dtype}")
        assert out.returncode == 0, out.stderr
        d = json.loads(out.stdout)
        assert d["gpu"]["name"] == gpu and d["gpu"]["source"] == "config"
        runs[dtype] = {(p["tp"], p["pp"]): p["memory"]["weights"] for p in d["predictions"]}
    assert runs["bf16"].keys() == runs["fp8"].keys()
    assert len(runs["fp8"]) == {1: 1, 2: 2, 4: 3, 8: 4}[gpus]
    for split, weights in runs["fp8"].items():
        assert weights * 2 == pytest.approx(runs["bf16"][split], rel=1e-6)
