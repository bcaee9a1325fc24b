"""backend=auto (the default) chosen in the front: nccl on GPUs where nccl4py is there, else
torch with one line saying why and how to get nccl; the saved configuration names the real
backend; torch_overhead follows the choice."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module

from gpulane.config.commands import SweepConfig
from gpulane.config.load import typed
from gpulane.errors import InputError
from gpulane.session.backend_choice import choose_backend, nccl4py_problem
from tests.helpers import gpulane, run_dirs


def composed(*overrides: str) -> SweepConfig:
    with initialize_config_module(config_module="gpulane.conf", version_base="1.3"):
        return typed(compose(config_name="sweep", overrides=list(overrides)), SweepConfig)


def never_called() -> str | None:
    raise AssertionError("nccl4py probed for a CPU run")


def test_default_is_auto() -> None:
    cfg = composed()
    assert cfg.backend.name == "auto"
    assert cfg.torch_overhead == "auto"


def test_gpus_with_nccl4py_get_nccl_and_the_torch_figure() -> None:
    cfg, line = choose_backend(composed(), "cuda", probe=lambda: None)
    assert cfg.backend.name == "nccl"
    assert (cfg.backend.memory, cfg.backend.loop, cfg.backend.stream) == ("nccl", "auto", "own")
    assert cfg.torch_overhead is True
    assert line is not None and "backend=auto: nccl" in line


def test_gpus_without_nccl4py_get_torch_and_one_line() -> None:
    cfg, line = choose_backend(composed(), "cuda", probe=lambda: "nccl4py does not import (x)")
    assert cfg.backend.name == "torch" and cfg.backend.memory == "torch"
    assert cfg.torch_overhead is False
    assert line == (
        "# backend=auto: torch, because nccl4py does not import (x); `pip install "
        "'gpulane[gpu]'` gives backend=nccl, which measures what nccl-tests measures"
    )


def test_cpus_get_torch_without_probing() -> None:
    cfg, line = choose_backend(composed(), "cpu", probe=never_called)
    assert cfg.backend.name == "torch" and line is None and cfg.torch_overhead is False


def test_real_probe_on_this_machine() -> None:
    """This machine has no libnccl (and nccl4py's core needs cuda-bindings): the probe says
    which, and a GPU run here would fall back to torch with that reason."""
    problem = nccl4py_problem()
    assert problem is not None and problem.startswith("nccl4py ")
    cfg, line = choose_backend(composed(), "cuda")
    assert cfg.backend.name == "torch" and line is not None and problem in line


def test_chosen_backends_are_left_alone() -> None:
    cfg, line = choose_backend(
        composed("backend=nccl", "backend.loop=python"), "cuda", never_called
    )
    assert (cfg.backend.name, cfg.backend.loop, line) == ("nccl", "python", None)
    assert cfg.torch_overhead is False  # auto: only when auto chose nccl
    cfg, _ = choose_backend(composed("backend=nccl", "torch_overhead=true"), "cuda", never_called)
    assert cfg.torch_overhead is True
    cfg, _ = choose_backend(composed("torch_overhead=false"), "cuda", probe=lambda: None)
    assert cfg.backend.name == "nccl" and cfg.torch_overhead is False
    with pytest.raises(InputError, match=r"torch_overhead=true .* needs backend=nccl on GPUs"):
        choose_backend(composed("backend=torch", "torch_overhead=true"), "cuda", never_called)


def test_auto_passes_its_options_on() -> None:
    cfg, _ = choose_backend(
        composed("backend.memory=torch", "backend.loop=python"), "cuda", probe=lambda: None
    )
    assert (cfg.backend.name, cfg.backend.memory, cfg.backend.loop) == ("nccl", "torch", "python")
    cfg, _ = choose_backend(composed("backend.memory=nccl"), "cuda", probe=lambda: "gone")
    assert (cfg.backend.name, cfg.backend.memory) == ("torch", "nccl")
    with pytest.raises(InputError, match=r"backend.loop=c asked for backend=nccl, but"):
        choose_backend(composed("backend.loop=c"), "cpu", probe=never_called)


def test_cpu_run_saves_the_real_backend(tmp_path: Path) -> None:
    out = gpulane(
        "sweep",
        "ranks=2",
        "collectives=all_reduce",
        "sizes.min=1K",
        "sizes.max=2K",
        "warmup=0",
        "iters=2",
        "progress=false",
        "results_dir=" + str(tmp_path),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    (run,) = run_dirs(tmp_path)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["backend"] == {"name": "torch", "memory": "torch"}
    assert saved["torch_overhead"] is False
    assert "torch on 2 cpu ranks" in out.stdout
    assert not (run / "torch_overhead.json").exists()


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    for args, said in [
        (["backend=nccl", "backend.loop=fast"], "backend.loop: expected auto, python or c"),
        (["backend=nccl", "backend.stream=legacy"], "backend.stream: expected own or current"),
        (["torch_overhead=maybe"], "torch_overhead: expected auto, true or false"),
        (["backend=torch", "torch_overhead=true"], "torch_overhead=true compares"),
    ]:
        out = gpulane("sweep", "device=cpu", *args, "results_dir=" + str(tmp_path), cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        assert said in out.stderr and "Traceback" not in out.stderr, out.stderr
