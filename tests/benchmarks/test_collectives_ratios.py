"""benchmarks/collectives/ratios.py on files shaped as run_gpu.sh leaves them: real
nccl-tests logs (captured on the H200 machine) and gpulane rows at known multiples of
their times, so every ratio it prints is known."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
LOG = ROOT / "tests" / "fixtures" / "h200x2" / "nccl-tests-mpi-all_reduce.txt"


def load_ratios() -> Any:
    spec = importlib.util.spec_from_file_location(
        "ratios", ROOT / "benchmarks" / "collectives" / "ratios.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gpulane_rows(out: Path, build: str, nt: dict[Any, dict[str, Any]], scale: float) -> None:
    run = out / "runs" / build
    run.mkdir(parents=True)
    with open(run / "rows.jsonl", "w") as fh:
        for (op, in_place, requested), ref in nt.items():
            row = {
                "kind": "collective",
                "build": build,
                "op": op,
                "in_place": in_place,
                "size_bytes": ref["size_bytes"],
                "count": ref["count"],
                "time_us": ref["time_us"] * scale,
                "busbw_gbps": ref["busbw_gbps"] / scale,
                "extra": {"requested_bytes": requested},
            }
            fh.write(json.dumps(row) + "\n")


def test_ratios_from_run_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ratios = load_ratios()
    nt = ratios.nccl_tests_points(LOG, 8)
    assert nt[("all_reduce", False, 8)]["time_us"] == 6.81  # the log's first line
    assert nt[("all_reduce", True, 1 << 20)]["time_us"] == 14.93
    # three rounds: 1.2, 1.0 and 1.05 times nccl-tests' time -> median 1.05
    for r, scale in ((1, 1.2), (2, 1.0), (3, 1.05)):
        shutil.copy(LOG, tmp_path / f"nt-plain-r{r}-all_reduce.txt")
        small = {k: v for k, v in nt.items() if k[2] < 1 << 20}
        gpulane_rows(tmp_path, f"plain-c-r{r}", small, scale)
    # from 1 MiB: one run at 0.95 of the busbw, against the lines of 1 MiB on
    lines = LOG.read_text().splitlines()
    first = next(i for i, x in enumerate(lines) if not x.startswith("#"))
    body = [x for x in lines[first:] if x.split() and x.split()[0].isdigit()]
    body = [x for x in body if int(x.split()[0]) >= 1 << 20]
    head = lines[:first]
    (tmp_path / "nt-plain-big-all_reduce.txt").write_text("\n".join(head + body) + "\n")
    big = ratios.nccl_tests_points(tmp_path / "nt-plain-big-all_reduce.txt", 1 << 20)
    gpulane_rows(tmp_path, "plain-big", big, 1 / 0.95)
    ratios.main(tmp_path)
    text = capsys.readouterr().out
    row = next(
        x for x in text.splitlines() if x.startswith("| all_reduce | out-of-place | plain C")
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "1.050"  # median over sizes of the per-size medians
    assert cells[4].startswith("1.050 (")
    assert cells[5].startswith("0.950 (")
    assert cells[6] == "**no**"  # 0.95 < 0.97
    assert "| 8 B | 6.81 µs | 7.15 µs | 1.050 |" in text  # median nt, median ours, ratio
    assert "Rounds below 1 MiB: 3" in text
