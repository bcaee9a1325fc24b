"""`gpulane tokens` refusing a model that does not fit says who holds the rest of the GPU:
the pre-flight's reading of the other process (pid, memory), else the bytes in use (the
lent 1x H200 with another process holding 126 GiB of 140 said only "has 11.3 GiB")."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpulane.errors import InputError
from gpulane.inference.memory import GiB, check_fits, held_by_others
from gpulane.topology.gpu_state import GPU_STATE_FILE
from tests.inference.test_shapes import shipped

WORDS = "GPU0 runs pid 31337 (python3, 0 %, 126.0 GiB)"


def _state(run_dir: Path, foreign: bool) -> None:
    gpu = {"name": "GPU0", "foreign": foreign, "words": WORDS if foreign else "GPU0: idle"}
    (run_dir / GPU_STATE_FILE).write_text(json.dumps({"before": {"gpus": [gpu]}}))


def test_the_other_process_is_named_with_its_pid(tmp_path: Path) -> None:
    _state(tmp_path, foreign=True)
    free, total = int(11.3 * GiB), int(140 * GiB)
    others = held_by_others(tmp_path, SimpleNamespace(index=0), free, total)
    assert others == f"another process holds the rest: {WORDS}"
    with pytest.raises(InputError) as err:
        check_fits(shipped("llama3-8b"), 32, 1, 1, 8, 2048, 128, 2, free, "GPU 0 (free now)",
                   others=others)  # fmt: skip
    text = str(err.value)
    assert f"GPU 0 (free now) has 11.3 GiB ({others}); use " in text


def test_without_a_reading_the_bytes_held_are_said(tmp_path: Path) -> None:
    _state(tmp_path, foreign=False)  # read, nothing foreign seen then: it came later
    held = held_by_others(tmp_path, SimpleNamespace(index=0), int(14 * GiB), int(140 * GiB))
    assert held == "126.0 GiB of 140 GiB is held outside this run (another process)"
    # a GPU whose memory is free (but a CUDA context) names no one
    assert held_by_others(None, SimpleNamespace(index=0), int(139 * GiB), int(140 * GiB)) == ""
