"""The ranging shot (collectives/ranging) and the live forecast built on it
(session/estimate.SweepForecast): planted heartbeats and ranging lines, written by the
real writers, for sweeps whose time jumps at a size the first 10 % of lines never reach
(as gloo's did tenfold between 128 and 256 KiB on the loaded 2-core machine, then grew as
about size^0.3: benchmarks/cli/README.md); and a real 2-rank gloo sweep, whose rows the
ranging calls must leave as they are."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from gpulane.collectives.harness import Timing
from gpulane.collectives.ranging import (
    MIN_SIZES,
    Shot,
    _report,
    ranging_path,
    ranging_sizes,
    read_ranging,
    wants_ranging,
)
from gpulane.rank import RankContext, RankInfo
from gpulane.rundir import write_heartbeat
from gpulane.session.estimate import SweepForecast
from tests.helpers import gpulane, rows_of, run_dirs

SIZES = [1 << k for k in range(3, 24)]  # 8 B .. 8 MiB, doubling: 21 lines a collective
TIMING = Timing()  # warm-up 5, iters 20, check 1: 26 calls a placement
CALLS = 26
FILL_S_PER_BYTE = 2e-9  # filling the inputs, or checking the result
JUMP = 256 << 10  # the size from which a call takes ten times as long, then grows slowly
# How much of its buffer a collective moves per rank (nccl-tests' bus factors); one rank
# copies its buffer once.
MOVES = {
    "all_reduce": lambda n: 2 * (n - 1) / n if n > 1 else 1.0,
    "all_gather": lambda n: (n - 1) if n > 1 else 1.0,  # its size is the per-rank share
    "broadcast": lambda n: 1.0,
}


def call_s(op: str, size: int, ranks: int) -> float:
    """A call's seconds: a latency, a size term that jumps tenfold at JUMP and grows as
    size^0.3 above it; slower with more ranks and with the collective's bytes moved."""
    latency = 40e-6 * max(ranks, 1)
    per_byte = 5e-9 * MOVES[op](ranks)
    if size < JUMP:
        return latency + per_byte * size
    return latency + 10 * per_byte * JUMP * (size / JUMP) ** 0.3


def context(run_dir: Path, ranks: int) -> RankContext:
    info = RankInfo(0, ranks, 0, ranks, None, None, "gpulane")
    return RankContext(info=info, run_dir=run_dir, host="host")


def plant_ranging(run_dir: Path, ops: list[str], ranks: int, places: dict[str, int]) -> None:
    """Rank 0's ranging lines as the rank writes them (its own writer)."""
    ctx = context(run_dir, ranks)
    write_heartbeat(run_dir, 0, 0, f"ranging {ops[0]} 8 MiB", "host")
    for op in ops:
        for size in reversed(ranging_sizes(SIZES)):
            fill = FILL_S_PER_BYTE * size
            _report(ctx, op, size, Shot(call_s(op, size, ranks), fill, fill, places[op]))


def truth(ops: list[str], ranks: int, places: dict[str, int]) -> list[float]:
    # a line: in every placement it runs, its calls, two fills and a check, and 3 % more
    # (its barriers, its row)
    return [
        1.03 * places[op] * (CALLS * call_s(op, s, ranks) + 3 * FILL_S_PER_BYTE * s)
        for op in ops
        for s in SIZES
    ]


def run_to(fc: SweepForecast, run_dir: Path | None, times: list[float], upto: int) -> float:
    """The ranks start (2 s), rank 0 beats its first point, lines 0..upto-1 are done."""
    fc.observe(0, 0.0)
    if run_dir is not None:
        write_heartbeat(run_dir, 0, 0, "all_reduce 8 B", "host")
    fc.observe(0, 2.0)
    fc.first_start = 2.0  # the heartbeat's clock is the wall's: the test's is its own
    fc.last_end = 2.0
    now = 2.0
    for i in range(upto):
        now += times[i]
        fc.observe(i + 1, now)
    return now


def forecast(ops: list[str], run_dir: Path | None) -> SweepForecast:
    lines = [(op, s) for op in ops for s in SIZES]
    # the a-priori model: a time per byte (no jump), as the forecast's own for CPU
    prior_a, prior_b = 2 * CALLS * 40e-6, 2 * CALLS / 0.065e9
    return SweepForecast(lines, prior_a, prior_b, run_dir, TIMING)


CASES = [
    (1, ["all_reduce"]),
    (2, ["all_reduce", "all_gather"]),
    (4, ["all_reduce", "broadcast"]),
    (8, ["all_gather", "all_reduce", "broadcast"]),
]


@pytest.mark.parametrize(("ranks", "ops"), CASES)
def test_after_a_tenth_of_the_lines_the_ranging_shot_holds_the_total(
    tmp_path: Path, ranks: int, ops: list[str]
) -> None:
    places = {"all_reduce": 1, "all_gather": 2, "broadcast": 2}  # gloo's all_reduce: in place
    times = truth(ops, ranks, places)
    upto = math.ceil(0.1 * len(times))  # the first 10 %: small sizes of the first collective
    assert all(SIZES[i] < JUMP for i in range(upto))
    plant_ranging(tmp_path, ops, ranks, places)

    fc = forecast(ops, tmp_path)
    now = run_to(fc, tmp_path, times, upto)
    told = now + fc.left_s(now)
    actual = 2.0 + sum(times)
    assert told == pytest.approx(actual, rel=0.25), (told, actual)
    band = fc.band()
    assert band is not None and abs(told / actual - 1) <= band

    # the same lines without the ranging shot: the small sizes cannot tell the jump
    blind = forecast(ops, None)
    now = run_to(blind, None, times, upto)
    assert abs((now + blind.left_s(now)) / actual - 1) > 0.25


def test_a_ranging_line_read_but_ignored_would_fail(tmp_path: Path) -> None:
    """The forecast reads the ranging file itself: the same series with its shot gives
    another (the right) total than without it."""
    ops, places = ["all_reduce", "all_gather"], {"all_reduce": 1, "all_gather": 2}
    times = truth(ops, 2, places)
    plant_ranging(tmp_path, ops, 2, places)
    fc = forecast(ops, tmp_path)
    now = run_to(fc, tmp_path, times, 5)
    assert fc.left_s(now) == pytest.approx(sum(times[5:]), rel=0.25)
    assert set(fc.ranged) == {(op, s) for op in ops for s in ranging_sizes(SIZES)}
    # the largest all_gather line: its calls, fills and check at the planted pace, in
    # both placements
    top = fc.line_s(len(fc.lines) - 1)
    one = CALLS * call_s("all_gather", SIZES[-1], 2) + 3 * FILL_S_PER_BYTE * SIZES[-1]
    assert top == pytest.approx(2 * one, rel=0.01)
    fc.ranged.clear()
    fc._cache.clear()
    fc._ranging_bytes = ranging_path(tmp_path).stat().st_size  # not read again
    with_shot = sum(times[5:])
    assert abs(fc.left_s(now) / with_shot - 1) > 0.5


def test_lines_at_ranging_sizes_scale_the_shots_still_ahead(tmp_path: Path) -> None:
    """Once a line at a ranging size is done, what it took against its shot scales the
    shots above it: a line's fills and checks, or a host slower now than at the start."""
    ops, places = ["all_reduce"], {"all_reduce": 1}
    plant_ranging(tmp_path, ops, 2, places)
    slower = [2 * t for t in truth(ops, 2, places)]  # the host twice as busy after the shot
    fc = forecast(ops, tmp_path)
    mid = SIZES.index(ranging_sizes(SIZES)[2])  # done up to the third ranging size (JUMP)
    now = run_to(fc, tmp_path, slower, mid + 1)
    assert fc.left_s(now) == pytest.approx(sum(slower[mid + 1 :]), rel=0.1)


def test_the_ranging_beat_is_not_the_first_points_start(tmp_path: Path) -> None:
    import time

    fc = forecast(["all_reduce"], tmp_path)
    t0 = time.monotonic()
    fc.observe(0, t0)
    write_heartbeat(tmp_path, 0, 0, "ranging all_reduce 8 MiB", "host")
    fc.observe(0, t0 + 1.0)
    assert fc.first_start is None  # the shot is running: no point has begun
    write_heartbeat(tmp_path, 0, 0, "all_reduce 8 B", "host")
    fc.observe(0, t0 + 4.0)
    assert fc.first_start == pytest.approx(t0 + 4.0, abs=1.0)


def test_the_ranging_sizes_are_the_top_of_the_range() -> None:
    # the bottom, halfway, 3/4, the top
    assert ranging_sizes(SIZES) == [8, 8 << 10, 256 << 10, 8 << 20]
    linear = list(range(512 << 10, (8 << 20) + 1, 512 << 10))
    picked = ranging_sizes(linear)
    assert picked[-1] == 8 << 20 and len(picked) == 4 and all(s in linear for s in picked)
    assert ranging_sizes(SIZES[: MIN_SIZES - 1]) == []  # a short sweep: no ranging
    assert len(ranging_sizes(SIZES[:MIN_SIZES])) == 4


def test_ranging_only_where_a_forecast_is_read() -> None:
    from types import SimpleNamespace

    assert wants_ranging(SimpleNamespace(progress=True, resume=False))
    assert not wants_ranging(SimpleNamespace(progress=False, resume=False))
    assert not wants_ranging(SimpleNamespace(progress=True, resume=True))


def test_a_line_being_written_is_skipped(tmp_path: Path) -> None:
    _report(context(tmp_path, 2), "all_reduce", 1 << 20, Shot(0.0123, 0.1, 0.05, 1))
    with open(ranging_path(tmp_path), "a", encoding="utf-8") as fh:
        fh.write('{"op": "all_gather", "si')  # rank 0 still writing it
    assert read_ranging(tmp_path) == {("all_reduce", 1 << 20): Shot(0.0123, 0.1, 0.05, 1)}
    notes = (tmp_path / ".heartbeat" / "notes").read_text()
    assert notes == "# ranging: all_reduce 1 MiB 12.3 ms a call (150 ms to fill and check)\n"
    # a line of it: 26 calls, 2 fills and a check
    assert Shot(0.0123, 0.1, 0.05, 1).line_s(TIMING) == pytest.approx(26 * 0.0123 + 0.25)


def test_a_real_sweep_ranges_first_and_keeps_its_rows(tmp_path: Path) -> None:
    """Real gloo ranks: the shot is in the log and its file, and the rows are the plan's
    lines exactly (no ranging call became a row)."""
    out = gpulane(
        "sweep",
        "device=cpu",
        "ranks=2",
        "collectives=[all_reduce,all_gather]",
        "sizes.min=1K",
        "sizes.max=256K",
        "warmup=1",
        "iters=2",
        "progress=true",
        f"results_dir={tmp_path}",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    notes = [ln for ln in out.stdout.splitlines() if ln.startswith("# ranging: ")]
    ranged, done = notes[:-1], notes[-1]
    assert re.fullmatch(r"# ranging: done in \d+\.\d s, before the first point \(no rows\)", done)
    sizes = [1 << k for k in range(10, 19)]
    want = [(op, s) for op in ("all_reduce", "all_gather") for s in reversed(ranging_sizes(sizes))]
    assert [ln.split()[2] for ln in ranged] == [op for op, _ in want]
    assert all(" ms a call (" in ln and ln.endswith(" ms to fill and check)") for ln in ranged)
    assert out.stdout.index("# ranging: ") < out.stdout.index("# all_reduce (")
    (run,) = run_dirs(tmp_path)
    shots = [json.loads(ln) for ln in ranging_path(run).read_text().splitlines()]
    assert [(s["op"], s["size"]) for s in shots[:-1]] == want
    assert all(s["s"] > 0 for s in shots[:-1]) and shots[-1]["took_s"] > 0
    assert set(read_ranging(run)) == set(want)  # the closing line is no shot
    rows = rows_of(run)
    lines = {(r["op"], r["size_bytes"]) for r in rows}
    assert lines == {(op, s) for op in ("all_reduce", "all_gather") for s in sizes}
    assert all(r["status"] == "ok" for r in rows)
    assert len(rows) == len({(r["op"], r["size_bytes"], r["in_place"]) for r in rows})


def test_points_done_before_any_poll_are_timed_from_the_shots_end(tmp_path: Path) -> None:
    """On a fast machine the first poll after the shot can find ten points done: they are
    timed from when the shot ended, not left out (the ETA stayed "rough" on an idle
    16-core host with 10 of 25 points done)."""
    import time

    ops = ["all_reduce"]
    places = {"all_reduce": 1}
    plant_ranging(tmp_path, ops, 2, places)
    write_heartbeat(tmp_path, 0, 3, "all_reduce 64 B", "host")  # the first point's beat: gone
    fc = forecast(ops, tmp_path)
    t0 = time.monotonic()
    fc.observe(0, t0)  # the shot is running, no end written yet
    assert fc.first_start is None
    with open(ranging_path(tmp_path), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"took_s": 1.0, "ended_at": time.time() - 0.5}) + "\n")
    fc.observe(10, t0 + 0.6)
    assert fc.first_start == pytest.approx(t0 + 0.1, abs=0.05)
    assert len(fc.took) == 10 and fc.band() is not None
    assert "rough" not in fc.eta(t0 + 0.6)
