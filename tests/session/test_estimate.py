"""The live forecast of a sweep (session/estimate.SweepForecast) on synthetic timings: a
line's time grows with its size as a + b * size, b with the ranks (1, 2, 4, 8 ranks'
worth: all_reduce moves 2(n-1)/n of the buffer); the a-priori model is off by a factor the
forecast has to learn from the lines done."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.collectives.plan import build_plan
from gpulane.commands.hydra_app import compose_typed
from gpulane.session.estimate import SweepForecast, plan_lines, sweep_estimate_s

SIZES = [1 << k for k in range(10, 25)]  # 1 KiB .. 16 MiB, doubling: 15 lines a collective
A_S = 0.004  # seconds of a line at the smallest sizes (its calls' latency)


def true_s(size: int, ranks: int, per_byte: float = 2e-8) -> float:
    return A_S + per_byte * 2 * (ranks - 1) / ranks * size


def feed(fc: SweepForecast, times: list[float], upto: int, start_up: float = 3.0) -> float:
    """Lines 0..upto-1 done at their ``times``; the clock after the last."""
    now = 0.0
    fc.observe(0, now)
    now += start_up
    for i in range(upto):
        now += times[i]
        fc.observe(i + 1, now)
    return now


def forecast(ops: list[str], prior_off: float) -> SweepForecast:
    lines = [(op, s) for op in ops for s in SIZES]
    # the a-priori model: the right shape, off by prior_off in both terms
    return SweepForecast(lines, A_S * prior_off, 2e-8 * prior_off)


@pytest.mark.parametrize("ranks", [1, 2, 4, 8])
@pytest.mark.parametrize("prior_off", [0.1, 10.0])
def test_the_time_left_comes_from_the_lines_measured(ranks: int, prior_off: float) -> None:
    fc = forecast(["all_reduce"], prior_off)
    times = [true_s(s, max(ranks, 2)) for s in SIZES]
    upto = 11  # up to 1 MiB: the size term shows above the latency
    now = feed(fc, times, upto)
    left = fc.left_s(now)
    truth = sum(times[upto:])
    assert left == pytest.approx(truth, rel=0.15), (left, truth)
    # the a-priori model alone would be off by prior_off: the measured points were used
    prior_only = sum(fc._prior(i) for i in range(upto, len(SIZES)))
    assert abs(prior_only - truth) > 0.5 * truth
    band = fc.band()
    assert band is not None and band <= 0.35
    assert "±" in fc.eta(now) and "rough" not in fc.eta(now)


def test_before_any_point_it_is_the_rough_a_priori_model() -> None:
    fc = forecast(["all_reduce"], 1.0)
    fc.observe(0, 0.0)
    assert fc.band() is None
    assert fc.eta(30.0).endswith("(rough)")  # start-up time is not a point running late
    assert fc.left_s(30.0) == pytest.approx(sum(true_s(s, 2) for s in SIZES), rel=0.05)


def test_a_collective_not_started_is_scaled_by_the_others() -> None:
    fc = forecast(["all_reduce", "all_gather"], 0.2)  # the prior 5x too fast
    times = [true_s(s, 2) for s in SIZES] * 2
    now = feed(fc, times, len(SIZES))  # all_reduce done, all_gather to come
    left = fc.left_s(now)
    assert left == pytest.approx(sum(times[len(SIZES) :]), rel=0.25)


def test_a_point_past_its_forecast_moves_the_eta() -> None:
    fc = forecast(["all_reduce"], 1.0)
    times = [true_s(s, 2) for s in SIZES]
    now = feed(fc, times, 11)
    on_time = fc.left_s(now)
    late = fc.left_s(now + 10 * times[11])  # line 11 ten times its forecast, still going
    assert late > 5 * on_time
    assert fc.now_doing(now + 3) == "all_reduce 2 MiB, 3 s on it"


def test_the_band_grows_when_the_forecast_missed() -> None:
    steady = forecast(["all_reduce"], 1.0)
    feed(steady, [true_s(s, 2) for s in SIZES], 11)
    noisy = forecast(["all_reduce"], 1.0)
    # every other line twice as long: the forecast of each missed by far
    feed(noisy, [true_s(s, 2) * (2 if i % 2 else 1) for i, s in enumerate(SIZES)], 11)
    assert (noisy.band() or 0) > (steady.band() or 0) + 0.1


def test_lines_of_one_poll_share_its_time() -> None:
    fc = forecast(["all_reduce"], 1.0)
    fc.observe(0, 0.0)
    fc.observe(1, 2.0)
    fc.observe(4, 2.0 + 3 * A_S)  # three small lines seen done at once
    assert sum(fc.took.values()) == pytest.approx(3 * A_S)


def test_plan_lines_follow_the_ranks_order() -> None:
    cfg = compose_typed(
        "sweep", ["device=cpu", "collectives=[all_reduce,all_gather]", "dtype=[float,half]",
                  "sizes.min=8", "sizes.max=64"],
    )  # fmt: skip
    plan = build_plan(cfg, on_device=False)
    lines = plan_lines(plan)
    assert len(lines) == plan.lines == 2 * 2 * 4
    assert lines[:5] == [("all_reduce", 8), ("all_reduce", 16), ("all_reduce", 32),
                         ("all_reduce", 64), ("all_reduce", 8)]  # fmt: skip
    fc = SweepForecast.for_plan(plan, 2, "cpu", 2)
    fc.observe(0, 0.0)
    # the a-priori forecast is slower than the floor told before the run, never faster
    assert fc.left_s(0.0) >= sweep_estimate_s(plan, 2, "cpu", 2)


def test_the_log_line_moves_on_a_long_point(capsys: pytest.CaptureFixture[str]) -> None:
    """The log line names the point being measured and its time so far, with the band."""
    import time

    from gpulane.session.live import LogProgress

    log = LogProgress(True, total=len(SIZES), every_s=0.0)
    fc = forecast(["all_reduce"], 1.0)
    log.forecast = fc
    feed(fc, [true_s(s, 2) for s in SIZES], 11)
    log.done, log.what = 11, "all_reduce"
    now = time.monotonic()
    assert fc.last_end is not None
    fc.last_end = now - 7  # line 11 has run 7 s
    log.tick(now)
    first = capsys.readouterr().err
    assert "11/15 points" in first and "(all_reduce 2 MiB, 7 s on it)" in first
    assert "±" in first
    fc.last_end = now - 12
    log.tick(now)
    assert "(all_reduce 2 MiB, 12 s on it)" in capsys.readouterr().err


def test_a_time_growing_slower_than_the_bytes_is_extrapolated_as_measured() -> None:
    """On a loaded host a line's time grew as size**0.3 from 256 KiB up (measured on the
    2-core machine, benchmarks/cli/README.md): no time per byte would forecast that."""
    fc = forecast(["all_reduce"], 1.0)
    times = [A_S + 0.02 * (s / 1024) ** 0.3 for s in SIZES]
    now = feed(fc, times, 11)
    assert fc.left_s(now) == pytest.approx(sum(times[11:]), rel=0.15)


def test_the_first_line_is_timed_from_rank_0s_first_heartbeat(tmp_path: Path) -> None:
    import time

    from gpulane.rundir import write_heartbeat

    lines = [("all_reduce", s) for s in SIZES]
    fc = SweepForecast(lines, A_S, 2e-8, run_dir=tmp_path)
    t0 = time.monotonic()
    fc.observe(0, t0)  # starting: no heartbeat yet
    write_heartbeat(tmp_path, 0, 0, "all_reduce 1 KiB", "host")
    fc.observe(0, t0 + 5.0)  # the poll that sees rank 0 begin the first point
    assert fc.first_start is not None and fc.first_start == pytest.approx(t0 + 5.0, abs=1.0)
    fc.observe(1, fc.first_start + 0.25)
    assert fc.took == {0: pytest.approx(0.25)}  # the start-up is not the line's time
