"""``run_id=NAME`` names the run directory (checked, never overwriting one), and a preset
(NCCL_* variables) on a backend that ignores NCCL is bad input before any rank starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.config.backend import BACKENDS
from gpulane.config.commands import SweepConfig
from gpulane.config.validate import check_preset, check_run_id
from gpulane.errors import InputError
from gpulane.rundir import make_run_dir
from tests.commands.test_errors import one_error
from tests.helpers import gpulane, rows_of, run_dirs


@pytest.mark.parametrize("name", ["myrun", "node-07.riser_x4", "2026+a", "a" * 128])
def test_safe_run_ids_are_kept(name: str) -> None:
    assert check_run_id(name) == name


@pytest.mark.parametrize("name", ["", "../up", "a/b", ".hidden", "my run", "a" * 129, "-x"])
def test_unsafe_run_ids_are_refused(name: str) -> None:
    with pytest.raises(InputError, match=r"run_id: .* is not a usable directory name"):
        check_run_id(name)


def test_run_id_names_the_directory_and_never_overwrites(tmp_path: Path) -> None:
    cfg = SweepConfig(results_dir=str(tmp_path), build="b", run_id="myrun")
    run = make_run_dir(cfg)
    assert run.path == tmp_path / "myrun" and run.run_id == "myrun"
    (run.path / "rows.jsonl").write_text('{"kept": 1}\n')
    with pytest.raises(InputError, match=r"run_id=myrun: .*myrun exists already"):
        make_run_dir(cfg)
    assert (run.path / "rows.jsonl").read_text() == '{"kept": 1}\n'
    # Without run_id: a new name every time.
    other = make_run_dir(SweepConfig(results_dir=str(tmp_path), build="b"))
    assert other.path != run.path and other.run_id.endswith(other.run_id[-4:])


def test_sweep_with_run_id_writes_there_then_refuses_again(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    args = ("sweep", "device=cpu", "ranks=2", "sizes.max=64", "iters=2", "warmup=1")
    first = gpulane(*args, "run_id=myrun", f"results_dir={runs}", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert run_dirs(runs) == [runs / "myrun"]
    rows = rows_of(runs / "myrun")
    assert rows and {r["run_id"] for r in rows} == {"myrun"}
    before = (runs / "myrun" / "rows.jsonl").read_bytes()
    again = gpulane(*args, "run_id=myrun", f"results_dir={runs}", cwd=tmp_path)
    line = one_error(again)
    assert line.startswith("gpulane: error: run_id=myrun: ") and "exists already" in line
    assert (runs / "myrun" / "rows.jsonl").read_bytes() == before
    bad = gpulane(*args, "run_id=../x", f"results_dir={runs}", cwd=tmp_path)
    assert "run_id: '../x' is not a usable directory name" in one_error(bad)
    assert run_dirs(runs) == [runs / "myrun"]


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


class _Cfg:
    def __init__(self, preset: str, backend: str) -> None:
        self.preset = _Named(preset)
        self.backend = BACKENDS[backend]()  # the option's own class, as Hydra composes it


@pytest.mark.parametrize(
    ("preset", "backend", "device", "refused"),
    [
        ("nvlink", "auto", "cpu", True),
        ("socket", "torch", "cpu", True),
        ("pcie-host", "mpi", "cuda", True),
        ("pcie-host", "mpi", "auto", True),
        ("none", "torch", "cpu", False),
        ("socket", "torch", "cuda", False),
        ("socket", "nccl", "cuda", False),
        ("nvlink", "auto", "auto", False),  # not known before the GPUs are counted
    ],
)
def test_preset_only_where_nccl_runs(preset: str, backend: str, device: str, refused: bool) -> None:
    cfg = _Cfg(preset, backend)
    if refused:
        with pytest.raises(InputError, match=rf"preset={preset}: a preset sets NCCL_"):
            check_preset(cfg, device)
    else:
        check_preset(cfg, device)


@pytest.mark.parametrize("preset", ["nvlink", "pcie-host", "socket"])
def test_sweep_preset_on_gloo_is_one_line_before_any_rank(tmp_path: Path, preset: str) -> None:
    runs = tmp_path / "runs"
    out = gpulane("sweep", "device=auto", f"preset={preset}", f"results_dir={runs}", cwd=tmp_path)
    line = one_error(out)
    assert f"preset={preset}: a preset sets NCCL_* variables" in line and "gloo" in line
    assert not runs.exists() or run_dirs(runs) == []
    assert "rank" not in out.stdout


def test_multirun_over_presets_on_cpu_refuses(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    out = gpulane(
        "sweep", "device=cpu", "-m", "preset=nvlink,socket", f"results_dir={runs}", cwd=tmp_path
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "preset=nvlink: a preset sets NCCL_*" in out.stderr
    assert "Traceback" not in out.stderr


def test_tokens_preset_on_cpu_is_refused(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    out = gpulane("tokens", "device=cpu", "preset=pcie-host", f"results_dir={runs}", cwd=tmp_path)
    assert "preset=pcie-host: a preset sets NCCL_* variables" in one_error(out)
    assert not runs.exists() or run_dirs(runs) == []
