"""`gpulane compare` on two (and three) builds derived from the H200 fixtures."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gpulane.analysis.compare import compare, to_csv, to_markdown
from gpulane.analysis.store import load_frame
from gpulane.commands import compare as compare_command
from gpulane.errors import InputError
from tests.analysis.fixture_rows import copy_rows, nccl_rows, tokens_rows, write_run
from tests.helpers import gpulane


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_run(
        root,
        nccl_rows("h200x2/nccl-tests-all_reduce.txt", build="nvlink", run_id="r-nvlink")
        + nccl_rows("h200x2/nccl-tests-all_gather.txt", build="nvlink", run_id="r-nvlink")
        + copy_rows(build="nvlink", run_id="r-nvlink")
        + tokens_rows(build="nvlink", run_id="r-nvlink", rate=1000.0),
    )
    write_run(
        root,
        nccl_rows(
            "h200x2/nccl-tests-all_reduce-p2p-disabled.txt", build="pcie-host", run_id="r-pcie"
        )
        + copy_rows(build="pcie-host", run_id="r-pcie", gbps={"GPU0": 50.0, "GPU1": 50.0})
        + tokens_rows(build="pcie-host", run_id="r-pcie", rate=600.0),
    )
    return root


def sides(runs: Path) -> list[tuple[str, pd.DataFrame]]:
    frame = load_frame([runs])
    return [(b, frame[frame["build"] == b]) for b in ("nvlink", "pcie-host")]


def test_shared_figures_with_ratios_and_paths(runs: Path) -> None:
    cmp = compare(sides(runs))
    t = cmp.table
    assert cmp.labels == ["nvlink", "pcie-host"]
    # all_gather was only measured on nvlink: not shared, not shown.
    assert set(t["op"]) == {"all_reduce", "h2d", "d2h", "decode"}
    one_gib = t[(t["figure"] == "all_reduce float 1 GiB") & (t["metric"] == "busbw_gbps")].iloc[0]
    assert one_gib["nvlink"] == pytest.approx(327.84)
    assert one_gib["pcie-host"] == pytest.approx(27.24)
    assert one_gib["ratio:pcie-host"] == pytest.approx(27.24 / 327.84)
    assert one_gib["path:nvlink"] == "NV18"
    h2d = t[(t["op"] == "h2d") & (t["size_bytes"] == 1 << 28)].iloc[0]
    assert h2d["ratio:pcie-host"] == pytest.approx(50.0 / 55.5)
    tok = t[(t["op"] == "decode") & (t["metric"] == "tokens_per_s")]
    assert sorted(tok["ratio:pcie-host"].round(3)) == [0.6, 0.6]
    s = cmp.summary.set_index(["kind", "op", "metric"])
    assert s.loc[("collective", "all_reduce", "busbw_gbps"), "at"] == "4 GiB"
    assert s.loc[("collective", "all_reduce", "busbw_gbps"), "largest:pcie-host"] == pytest.approx(
        (27.82 / 344.42 + 27.90 / 344.86) / 2
    )
    # The outer join keeps figures one side lacks.
    full = compare(sides(runs), shared_only=False).table
    assert "all_gather" in set(full["op"])
    assert full[full["op"] == "all_gather"]["pcie-host"].isna().all()


def test_outputs(runs: Path) -> None:
    cmp = compare(sides(runs), metrics=("busbw_gbps",))
    md = to_markdown(cmp)
    assert "| kind | figure | metric | nvlink | pcie-host | pcie-host/nvlink | paths |" in md
    assert (
        "| collective | all_reduce float 1 GiB | busbw_gbps (GB/s) | 327.8 | 27.24 | 0.083 | NV18 \\| NV18 |"
        in md
    )
    back = pd.read_csv(io.StringIO(to_csv(cmp)))
    assert list(back.columns[:5]) == ["kind", "op", "figure", "size_bytes", "metric"]
    assert len(back) == 60  # the P2P-off run stops at 4 GiB: 30 sizes x 2 variants


def test_compare_command(runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plots = tmp_path / "plots"
    code = compare_command.main(
        [
            "nvlink",
            "pcie-host",
            "--results-dir",
            str(runs),
            "--plot",
            str(plots),
            "--size-min",
            "64M",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "Compare: nvlink vs pcie-host" in out and "0.083" in out
    names = sorted(p.stem for p in plots.glob("*.png"))
    assert names == [
        "collective-all_gather-nccl-tests-float-2-ranks",  # only nvlink has it: still drawn
        "collective-all_reduce-nccl-tests-float-2-ranks",
        "copies",
        "tokens-llama-1b-input-128-output-128",
    ]
    for name in names:
        png = (plots / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert (
        compare_command.main(
            [str(runs / "r-nvlink"), str(runs / "r-pcie"), "--format", "json", "--op", "all_reduce"]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["sides"] == ["nvlink", "pcie-host"]
    assert {f["op"] for f in data["figures"]} == {"all_reduce"}
    with pytest.raises(InputError, match="at least two"):
        compare_command.main(["nvlink", "--results-dir", str(runs)])


def test_three_builds_and_same_label(runs: Path) -> None:
    frame = load_frame([runs])
    nv = frame[frame["build"] == "nvlink"]
    cmp = compare(
        [("nvlink", nv), ("nvlink", nv), ("pcie-host", frame[frame["build"] == "pcie-host"])]
    )
    assert cmp.labels == ["nvlink", "nvlink#2", "pcie-host"]
    measured = cmp.table[cmp.table["nvlink"] > 0]  # 0.00 GB/s at the smallest sizes
    assert (measured["ratio:nvlink#2"] == 1.0).all()


def test_compare_cli_markdown_in_a_real_process(runs: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulane",
            "compare",
            "nvlink",
            "pcie-host",
            "--results-dir",
            str(runs),
            "--format",
            "markdown",
            "--kind",
            "copy",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "## Compare: nvlink vs pcie-host" in proc.stdout
    assert "h2d pinned 256 MiB" in proc.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulane",
            "compare",
            "nvlink",
            "riser-x4",
            "--results-dir",
            str(runs),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "riser-x4" in bad.stderr and "Traceback" not in bad.stderr


def world_sizes(tmp_path: Path) -> Path:
    """Two builds measured over different numbers of ranks: nothing in common."""
    root = tmp_path / "ws"
    write_run(root, nccl_rows("h200x2/nccl-tests-all_reduce.txt", build="two", run_id="r2"))
    write_run(
        root,
        nccl_rows(
            "h200x2/nccl-tests-all_reduce.txt", build="four", run_id="r4", world_size=4, path=None
        ),
    )
    return root


def test_nothing_shared_names_the_key_that_kept_figures_apart(tmp_path: Path) -> None:
    root = world_sizes(tmp_path)
    proc = gpulane("compare", str(root / "r2"), str(root / "r4"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line == (
        "gpulane: error: no figure is shared by two, four: collective figures differ in "
        "world_size (two: 2; four: 4); --all lists them side by side"
    )
    # --all: both, each label once with the key that tells them apart, no nan anywhere
    proc = gpulane(
        "compare", str(root / "r2"), str(root / "r4"), "--all", "--size-max", "16",
        "--format", "markdown", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "nan" not in proc.stdout
    table = proc.stdout.split("### Figures")[1]
    figures = [
        ln.split("|")[2].strip() for ln in table.splitlines() if ln.startswith("| collective")
    ]
    assert len(figures) == len(set(figures)) == 8
    assert "all_reduce float 8 B (world_size 2)" in figures
    assert "all_reduce float 8 B in-place (world_size 4)" in figures
    assert "| 0 | - | - | NV18 \\| - |" in proc.stdout


def test_partly_shared_says_which_kinds_were_not_compared(runs: Path) -> None:
    frame = load_frame([runs])
    nv = frame[frame["build"] == "nvlink"]
    other = frame[(frame["build"] == "pcie-host") & (frame["kind"] != "tokens")]
    cmp = compare([("nvlink", nv), ("pcie-host", other)])
    assert cmp.notes == ["pcie-host has no token rows"]
    assert "- not compared: pcie-host has no token rows" in to_markdown(cmp)
