"""The result store and `gpulane results`: run directories of real-shaped rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gpulane.analysis.store import (
    Filters,
    ResultStore,
    find_run_dirs,
    find_topology,
    load_frame,
    resolve_targets,
)
from gpulane.commands import results as results_command
from gpulane.errors import InputError, MissingComponent
from gpulane.record import ROWS_JSONL
from tests.analysis.fixture_rows import copy_rows, nccl_rows, tokens_rows, write_run


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_run(
        root,
        nccl_rows("h200x2/nccl-tests-all_reduce.txt", build="nvlink", run_id="r-nvlink")
        + copy_rows(build="nvlink", run_id="r-nvlink")
        + tokens_rows(build="nvlink", run_id="r-nvlink", rate=900.0),
    )
    # JSON Lines only (a run that died before its Parquet copy), last line cut short.
    d = write_run(
        root,
        nccl_rows(
            "h200x2/nccl-tests-all_reduce-p2p-disabled.txt",
            build="pcie-host",
            run_id="r-pcie",
            env={"NCCL_P2P_DISABLE": "1"},
        ),
        parquet=False,
    )
    with open(d / ROWS_JSONL, "a") as fh:
        fh.write('{"run_id": "r-pcie", "kind": "coll')
    return root


def test_loads_every_run_dir_jsonl_and_parquet(runs: Path) -> None:
    assert [d.name for d in find_run_dirs(runs)] == ["r-nvlink", "r-pcie"]
    frame = load_frame([runs])
    assert set(frame["build"]) == {"nvlink", "pcie-host"}
    nv = frame[frame["run_id"] == "r-nvlink"]
    assert (Path(nv["run_dir"].iloc[0]) / "rows.parquet").exists()
    assert len(nv[nv["kind"] == "collective"]) == 62  # 31 sizes x 2 variants
    assert len(nv[nv["kind"] == "copy"]) == 12
    pcie = frame[frame["run_id"] == "r-pcie"]
    assert len(pcie) == 60  # the cut line is skipped
    assert pcie["env"].iloc[0] == {"NCCL_P2P_DISABLE": "1"}  # dicts, from JSON Lines
    assert nv["env"].iloc[0] == {}  # dicts, from Parquet's JSON text
    one_gib = frame[(frame["size_bytes"] == 1 << 30) & (frame["run_id"] == "r-nvlink")]
    assert set(one_gib["figure"]) == {"all_reduce float 1 GiB", "all_reduce float 1 GiB in-place"}
    assert one_gib["busbw_gbps"].max() == pytest.approx(328.36)


def test_filters(runs: Path) -> None:
    store = ResultStore([runs])
    assert set(store.select(kind=["copy"])["op"]) == {"h2d", "d2h"}
    assert set(store.select(op=["all_*"])["kind"]) == {"collective"}
    got = store.select(Filters(build=["pcie-*"], size_min="1G", where="in_place == False"))
    assert len(store.select(Filters(kind=["tokens"], size_min="1G"))) == 2  # no size: kept
    assert list(got["size_bytes"]) == [1 << 30, 1 << 31, 1 << 32]
    assert got["busbw_gbps"].max() < 30
    with pytest.raises(InputError, match="--where"):
        store.select(where="no_such_column > 1")
    empty = store.select(kind=["tokens"], build=["pcie-host"])
    assert empty.empty and "busbw_gbps" in empty.columns


def test_resolve_targets_by_path_run_and_build(runs: Path) -> None:
    got = resolve_targets([str(runs / "r-nvlink"), "r-pcie", "nvlink"], runs)
    assert [label for label, _ in got] == ["nvlink", "r-pcie", "nvlink"]
    assert len(got[1][1]) == 60
    with pytest.raises(InputError, match="builds there: nvlink, pcie-host"):
        resolve_targets(["riser-x4"], runs)


def test_missing_paths_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such run directory"):
        load_frame([tmp_path / "nope"])
    with pytest.raises(InputError, match=r"no rows\.jsonl"):
        load_frame([tmp_path])


def test_find_topology_in_group(runs: Path) -> None:
    assert find_topology([runs / "r-nvlink"]) is None
    (runs / "topology.json").write_text('{"gpus": []}')
    assert find_topology([runs / "r-nvlink"]) == runs / "topology.json"


def test_sql_is_optional(runs: Path) -> None:
    store = ResultStore([runs])
    try:
        import duckdb  # noqa: F401
    except ImportError:
        with pytest.raises(MissingComponent, match="DuckDB"):
            store.sql("select 1")
    else:
        out = store.sql("select build, count(*) as n from rows group by build order by build")
        assert list(out["build"]) == ["nvlink", "pcie-host"]


def test_results_command_formats(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        results_command.main(
            [str(runs), "--kind", "collective", "--size-min", "4G", "--format", "csv"]
        )
        == 0
    )
    out = capsys.readouterr().out
    frame = pd.read_csv(pd.io.common.StringIO(out))
    assert set(frame["build"]) == {"nvlink", "pcie-host"}
    assert list(frame.columns)[:5] == ["run_id", "build", "kind", "backend", "op"]
    assert "busbw_gbps" in frame.columns and "tokens_per_s" not in frame.columns

    assert results_command.main([str(runs), "--kind", "tokens", "--format", "json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["tp"] for r in lines] == [2, 1]

    assert (
        results_command.main([str(runs), "--op", "h2d", "--format", "markdown", "--limit", "2"])
        == 0
    )
    md = capsys.readouterr().out.splitlines()
    assert md[0].startswith("| run_id | build |") and len(md) == 4

    assert results_command.main([str(runs), "--build", "nvlink", "--kind", "copy"]) == 0
    assert "12 rows" in capsys.readouterr().out


def test_results_cli_in_a_real_process(runs: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulane",
            "results",
            str(runs),
            "--where",
            "busbw_gbps > 340",
            "--format",
            "csv",
            "--columns",
            "build,size_bytes,busbw_gbps",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "build,size_bytes,busbw_gbps"
    assert all(line.startswith("nvlink,") for line in lines[1:]) and len(lines) == 5
    bad = subprocess.run(
        [sys.executable, "-m", "gpulane", "results", str(runs / "missing")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("gpulane: error:") and "Traceback" not in bad.stderr
