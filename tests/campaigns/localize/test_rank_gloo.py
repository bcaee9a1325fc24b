"""Localization through real processes: `gpulane sweep localize=[pairs,halving,ring]` on
gloo ranks (the "GPUs"), one of them slowed for real (it sleeps before each operation of a
subset that holds it) or one pair of them (rank a sleeps when b is in the subset too).
Each launch runs the three patterns in turn; each must name the planted fault."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import gpulane, run_dirs

COMMON = [
    "device=cpu",
    "localize=[pairs,halving,ring]",
    "slow_ms=500",
    "sizes.max=4K",
    "iters=3",
    "warmup=1",
    # A loaded shared CPU makes healthy gloo figures swing many times over (a 4 KiB op of
    # about 1 ms stalled past 0.1 and 0.04 of the best beside other tests, in CI runs of
    # 2026-11-27); the planted 0.5 s per operation is some 500 times slower, 5 times past
    # the tolerance. The test mostly sleeps: 4 planted sleeps a subset that holds the slow
    # rank, not 5 of 1 s (CI time, issue 45).
    "localize_tolerance=0.01",
    "progress=false",
]


def localized(tmp_path: Path, *args: str) -> tuple[list[dict], list[dict]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    given = {a.split("=")[0] for a in args}
    common = [c for c in COMMON if c.split("=")[0] not in given]  # a test's own value wins
    p = gpulane("sweep", f"results_dir={tmp_path}", *common, *args, cwd=tmp_path, timeout=400)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    (run,) = run_dirs(tmp_path)
    found = json.loads((run / "localize.json").read_text())
    rows = [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines() if x]
    return found["results"], rows


def localized_twice(
    tmp_path: Path, named: Callable[[dict], bool], *args: str
) -> tuple[list[dict], list[dict]]:
    """:func:`localized`, launched a second time when a pattern missed the planted fault
    on the first: 8 gloo ranks on the 2-core CI machine beside other tests' processes have
    had one healthy subset stall as long as the planted second (a CI run of 2026-11-27,
    halving on 8 ranks). A broken planner misses twice; the second launch must name it."""
    results, rows = localized(tmp_path / "first", *args)
    if all(named(r) for r in results):
        return results, rows
    return localized(tmp_path / "second", *args)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_one_slow_gpu_is_named_by_every_pattern(tmp_path: Path, n: int) -> None:
    slow = n - 1
    results, rows = localized_twice(
        tmp_path,
        lambda r: r["gpus"] == [f"GPU{slow}"] and r["pairs"] == [],
        f"ranks={n}",
        f"slow_rank={slow}",
        # 8 ranks on 2 cores beside the other tests: a healthy half of halving once stalled
        # as long as 0.5 s planted 3 times, on both launches (a CI run of 2026-12-02)
        *(["slow_ms=1000"] if n == 8 else []),
    )
    assert [r["pattern"] for r in results] == ["pairs", "halving", "ring"]
    for r in results:
        assert r["gpus"] == [f"GPU{slow}"] and r["pairs"] == [], r
    # every subset measured is a row of its own, with its members
    assert len(rows) == sum(r["measurements"] for r in results)
    assert all(row["kind"] == "localize" and row["extra"]["localize"]["subset"] for row in rows)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_one_slow_pair_is_named_by_every_pattern(tmp_path: Path, n: int) -> None:
    # GPU0-GPU1: a ring neighbour pair and inside the first half, which every pattern
    # can see (docs/localize.md says which links ring and halving cannot).
    extra = ["localize_node_failed=true"] if n == 2 else []
    results, _ = localized_twice(
        tmp_path,
        lambda r: r["pairs"] == [["GPU0", "GPU1"]] and r["gpus"] == [],
        f"ranks={n}",
        "slow_pair=[0,1]",
        *extra,
    )
    for r in results:
        assert r["pairs"] == [["GPU0", "GPU1"]] and r["gpus"] == [], r


def test_bad_pattern_is_one_error_line_before_any_rank(tmp_path: Path) -> None:
    p = gpulane("sweep", f"results_dir={tmp_path}", "device=cpu", "localize=bisect", cwd=tmp_path)
    assert p.returncode == 2 and "gpulane: error: localize:" in p.stderr
    assert "Traceback" not in p.stderr
