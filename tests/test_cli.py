"""Command-line errors: one line naming the input, non-zero exit, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import gpulane


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["collectives=allreduce_x"], 2, "collective: unknown collective 'allreduce_x'"),
        (["dtype=float128"], 2, "dtype: unknown type 'float128'"),
        (["redop=mean"], 2, "redop: unknown reduction 'mean'"),
        (["sizes.min=1M", "sizes.max=1K"], 2, "sizes: max (1K) is below min (1M)"),
        (["sizes.max=12Q"], 2, "sizes.max: expected a size"),
        (["device=cuda"], 2, "no GPU is visible"),
        (["device=tpu"], 2, "device: expected auto, cuda or cpu"),
        (["ranks=0"], 2, "ranks: expected auto or a whole number >= 1"),
        (["iters=0"], 2, "iters: expected a whole number >= 1"),
        (["collectives=broadcast", "root=5"], 2, "root: 5 is not a rank of a 2-rank run"),
        (["in_place=sometimes"], 2, "in_place: expected both, true or false"),
        (["backend=nccl"], 2, "needs GPUs"),
        (["results_dir=/proc/forbidden"], 2, "results_dir: cannot write run directory"),
    ],
)
def test_bad_sweep_input(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    out = gpulane(
        "sweep",
        "device=cpu" if "device" not in args[0] else args[0],
        *[a for a in args if not a.startswith("device")],
        "sizes.max=1K" if not any(a.startswith("sizes.max") for a in args) else "iters=1",
        f"results_dir={tmp_path}" if not any("results_dir" in a for a in args) else "warmup=0",
        cwd=tmp_path,
    )
    assert out.returncode == code, out.stderr
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert len([ln for ln in out.stderr.splitlines() if ln.startswith("gpulane: error")]) == 1


def test_unknown_key_is_hydra_one_liner(tmp_path: Path) -> None:
    out = gpulane("sweep", "colectives=all_reduce", cwd=tmp_path)
    assert out.returncode != 0
    assert "colectives" in out.stderr
    assert "Traceback" not in out.stderr


def test_unknown_command(tmp_path: Path) -> None:
    out = gpulane("sweeep", cwd=tmp_path)
    assert out.returncode == 2
    assert "unknown command 'sweeep'" in out.stderr


def test_help_lists_commands(tmp_path: Path) -> None:
    out = gpulane("--help", cwd=tmp_path)
    assert out.returncode == 0
    for name in ("sweep", "topo", "copy", "tokens", "compare", "accept"):
        assert name in out.stdout
    out = gpulane("sweep", "--help", cwd=tmp_path)
    assert out.returncode == 0
    assert "gpulane sweep" in out.stdout and "preset" in out.stdout


def test_sizes_a_collective_cannot_split_are_rounded_and_said(tmp_path: Path) -> None:
    out = gpulane(
        "sweep",
        "device=cpu",
        "collectives=all_gather",
        "sizes.min=8",
        "sizes.max=64",
        "iters=1",
        f"results_dir={tmp_path}",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "# note: all_gather float on 2 ranks: 8 B -> 0 B, 16 B -> 0 B (rounded down" in (
        out.stdout
    )
