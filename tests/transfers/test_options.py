"""`gpulane copy` without a GPU, and its settings (CI has no GPU)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from gpulane.errors import InputError, MissingComponent
from gpulane.transfers.measure import fill_pattern, load_torch
from gpulane.transfers.options import read_options
from tests import helpers


def _copy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # no GPU, even on a GPU host
    return helpers.gpulane("copy", *args, cwd=cwd, timeout=300, env={"CUDA_VISIBLE_DEVICES": ""})


def test_no_gpu_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = _copy(f"results_dir={tmp_path / 'runs'}", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "gpulane: error: gpulane copy needs an NVIDIA GPU"
    )
    assert "Traceback" not in res.stderr + res.stdout
    assert not (tmp_path / "runs").exists()  # nothing half-made


def test_bad_setting_is_named_before_any_gpu_work(tmp_path: Path) -> None:
    res = _copy("sizes.min=1001", cwd=tmp_path)
    assert res.returncode == 2
    assert "sizes: 1001 bytes is not a multiple of 4" in res.stderr
    res = _copy("memory=[pinned,shared]", cwd=tmp_path)
    assert res.returncode == 2 and "memory: 'shared' is not one of" in res.stderr
    res = _copy("no_such_key=1", cwd=tmp_path)
    assert res.returncode != 0 and "Traceback" not in res.stderr


def test_help_lists_examples(tmp_path: Path) -> None:
    res = _copy("--help", cwd=tmp_path)
    assert res.returncode == 0
    assert "gpulane copy -m numa=local,remote" in res.stdout
    assert "sizes.max" in res.stdout  # every key with its meaning (gpulane copy --help)


def _cfg(*overrides: str):
    with initialize_config_module(config_module="gpulane.conf", version_base="1.3"):
        return compose(config_name="copy", overrides=list(overrides))


def test_default_options() -> None:
    opts = read_options(_cfg())
    assert opts.sizes[0] == 4096 and opts.sizes[-1] == 1 << 30 and len(opts.sizes) == 19
    assert opts.directions == ["h2d", "d2h", "bidir"]
    assert opts.memory == ["pageable", "pinned", "pinned-wc"]
    assert opts.peer_access == [False, True]
    assert opts.latency_size == 16 and opts.samples == 10 and opts.numa == "local"


def test_option_forms() -> None:
    opts = read_options(
        _cfg("memory=all", "directions=h2d", "peer_access=true", "sizes.max=64K", "numa=remote")
    )
    assert opts.memory == ["pageable", "pinned", "pinned-wc"]
    assert opts.directions == ["h2d"]
    assert opts.peer_access == [True]
    assert opts.sizes == [4096, 8192, 16384, 32768, 65536]
    assert read_options(_cfg("peer_access=both")).peer_access == [False, True]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("samples=0", "samples"),
        ("engine=cuda", "engine"),
        ("peer_access=[maybe]", "peer_access"),
        ("latency_size=6", "latency_size"),
        ("directions=[sideways]", "directions"),
        ("sizes.max=1K", "below min"),
    ],
)
def test_bad_options(override: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_options(_cfg(override))


def test_gpu_module_imports_without_gpu() -> None:
    import numpy as np

    a = np.zeros(64, dtype=np.uint8)
    fill_pattern(a, chunk_words=5)
    assert a.view(np.int32).tolist() == list(range(16))
    env_cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        torch = load_torch()
    except MissingComponent as err:
        assert "needs an NVIDIA GPU" in str(err) or "PyTorch" in str(err)
    else:  # a GPU host: nothing to check here
        assert torch.cuda.device_count() > 0 or env_cuda == ""
