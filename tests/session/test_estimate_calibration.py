"""The calibration of the ranging shots by the lines done (session/estimate.SweepForecast):
a line's own cost beyond its calls (barriers, its row, its beat; about 40 ms a line on the
2-core VM, against a 7 ms shot at 8 B), a host slower after the shot, a shot spiked by
the host's other jobs, the shots' spread as the band, and a sweep of two dtypes. Planted
heartbeats and ranging lines, written by the real writers (tests/session/
test_estimate_ranging.py's helpers), for 1, 2, 4 and 8 ranks."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpulane.collectives.ranging import Shot, _report, ranging_sizes, read_ranging
from gpulane.rundir import write_heartbeat
from gpulane.session.estimate import SweepForecast
from tests.session.test_estimate_ranging import (
    CALLS,
    FILL_S_PER_BYTE,
    JUMP,
    SIZES,
    TIMING,
    call_s,
    context,
    forecast,
    plant_ranging,
    run_to,
    truth,
)

PLACES = {"all_reduce": 1, "all_gather": 2, "broadcast": 2}
PER_LINE_S = 0.4  # a line's own cost beyond its calls, fills and checks (a loaded host)


class Uncalibrated(SweepForecast):
    """The same forecast with the shots taken at face value."""

    def _calibration(self, op: str, without: int | None = None) -> tuple[float, float]:
        return 0.0, 1.0


def uncalibrated(ops: list[str], run_dir: Path) -> SweepForecast:
    fc = forecast(ops, run_dir)
    return Uncalibrated(fc.lines, fc.prior_a, fc.prior_b, run_dir, TIMING)


@pytest.mark.parametrize(
    ("ranks", "ops"),
    [(1, ["all_reduce"]), (2, ["all_reduce", "all_gather"]), (4, ["broadcast"]), (8, ["all_reduce", "broadcast"])],
)  # fmt: skip
def test_a_lines_own_cost_is_learnt_from_the_first_lines(
    tmp_path: Path, ranks: int, ops: list[str]
) -> None:
    """After the first 10 % of lines (all far under the size jump) the per-line cost they
    show is added to every shot ahead; without it the total misses by more than 25 %."""
    times = [PER_LINE_S + t for t in truth(ops, ranks, PLACES)]
    upto = math.ceil(0.1 * len(times))
    assert all(SIZES[i] < JUMP for i in range(upto))
    plant_ranging(tmp_path, ops, ranks, PLACES)
    actual = 2.0 + sum(times)

    fc = forecast(ops, tmp_path)
    now = run_to(fc, tmp_path, times, upto)
    told = now + fc.left_s(now)
    assert told == pytest.approx(actual, rel=0.10), (told, actual)
    off, ratio = fc._calibration(ops[0])
    assert off == pytest.approx(PER_LINE_S, rel=0.2) and ratio == 1.0  # no size term yet
    band = fc.band()
    assert band is not None and abs(told / actual - 1) <= band

    blind = uncalibrated(ops, tmp_path)
    now = run_to(blind, tmp_path, times, upto)
    assert abs((now + blind.left_s(now)) / actual - 1) > 0.25


@pytest.mark.parametrize("ranks", [1, 2, 4, 8])
def test_a_host_slower_after_the_shot_is_learnt_at_a_ranging_size(
    tmp_path: Path, ranks: int
) -> None:
    """Lines 1.8 times their shots from the size jump on (the host busier after the
    shot): once the line at the ranging size past the jump is done, the shots above it
    are scaled as much; the face-value shots miss by more."""
    ops = ["all_reduce", "all_gather"]
    plant_ranging(tmp_path, ops, ranks, PLACES)
    times = [
        0.05 + (1.8 if size >= JUMP else 1.0) * t
        for (_, size), t in zip(forecast(ops, None).lines, truth(ops, ranks, PLACES), strict=True)
    ]
    at = SIZES.index(ranging_sizes(SIZES)[2])  # the ranging size past the jump
    assert SIZES[at] >= JUMP
    fc = forecast(ops, tmp_path)
    now = run_to(fc, tmp_path, times, at + 1)
    left = sum(times[at + 1 :])
    assert fc.left_s(now) == pytest.approx(left, rel=0.10)
    assert fc._calibration("all_reduce")[1] == pytest.approx(1.8, rel=0.05)
    # all_gather, not begun: scaled by all_reduce's lines
    assert fc._calibration("all_gather")[1] == pytest.approx(1.8, rel=0.05)

    blind = uncalibrated(ops, tmp_path)
    now = run_to(blind, tmp_path, times, at + 1)
    assert abs(blind.left_s(now) / left - 1) > 0.25


def test_a_shot_spiked_by_the_host_is_dropped(tmp_path: Path) -> None:
    """A shot slower than the shot at a larger size is the host's spike (a 32 KiB call of
    8.5 ms against a 2 MiB one of 3.2 ms on the 2-core VM): it is dropped, so that lines
    around it are not told as slow."""
    ops = ["all_reduce"]
    plant_ranging(tmp_path, ops, 2, PLACES)
    mid = ranging_sizes(SIZES)[1]
    spiked = Shot(500 * call_s("all_reduce", mid, 2), 0.0, 0.0, 1)
    _report(context(tmp_path, 2), "all_reduce", mid, spiked)  # read after the first
    assert read_ranging(tmp_path)[("all_reduce", mid)] == spiked
    times = truth(ops, 2, PLACES)
    fc = forecast(ops, tmp_path)
    now = run_to(fc, tmp_path, times, 3)
    assert ("all_reduce", mid) not in fc.ranged and len(fc.ranged) == 3
    assert now + fc.left_s(now) == pytest.approx(2.0 + sum(times), rel=0.25)


def test_the_band_grows_with_the_shots_spread(tmp_path: Path) -> None:
    """The same shots, their calls spread 5 % or 80 %: the band of the time resting on
    them says so."""
    bands = []
    for spread in (0.05, 0.8):
        run = tmp_path / str(spread)
        ctx = context(run, 2)
        write_heartbeat(run, 0, 0, "ranging all_reduce 8 MiB", "host")
        for size in reversed(ranging_sizes(SIZES)):
            fill = FILL_S_PER_BYTE * size
            _report(
                ctx, "all_reduce", size, Shot(call_s("all_reduce", size, 2), fill, fill, 1, spread)
            )
        fc = forecast(["all_reduce"], run)
        run_to(fc, run, truth(["all_reduce"], 2, PLACES), 3)
        bands.append(fc.band())
    low, high = bands
    assert low is not None and high is not None
    assert high - low == pytest.approx((0.8 - 0.05) / 2, rel=0.25)


def test_two_dtypes_after_a_tenth_of_the_lines(tmp_path: Path) -> None:
    """dtype=[float,double]: the lines are every size of float, then of double (the
    ranks' order); the shots (float's) tell both, the double lines done tell the rest."""
    ops = ["all_reduce"]
    plant_ranging(tmp_path, ops, 2, PLACES)
    one = [PER_LINE_S + t for t in truth(ops, 2, PLACES)]
    times = one + [1.1 * t for t in one]  # double: a little slower at the same bytes
    fc = forecast(ops, tmp_path)
    fc.lines = fc.lines + fc.lines  # the same (collective, size) lines once more
    upto = math.ceil(0.1 * len(times))
    now = run_to(fc, tmp_path, times, upto)
    actual = 2.0 + sum(times)
    assert now + fc.left_s(now) == pytest.approx(actual, rel=0.25)
    now = run_to(fc, tmp_path, times, len(one) + 2)  # float done, two double lines
    assert now + fc.left_s(now) == pytest.approx(actual, rel=0.10)
    assert CALLS == 26  # the planted line's calls (harness.Timing's defaults)
