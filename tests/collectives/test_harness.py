"""The harness's statistics on fixed inputs: percentiles as numpy's default (linear)
computes them, and a point's summary (mean over ranks, percentiles over the slowest rank
per iteration, bandwidths) to the exact figure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpulane.collectives.harness import Measurement, percentile, summarize
from gpulane.collectives.spec import plan_point


def test_percentile_of_one_to_hundred() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile(values, 90) == pytest.approx(90.1)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 100.0


@pytest.mark.parametrize("q", [0, 1, 25, 50, 75, 90, 99, 99.9, 100])
@pytest.mark.parametrize(
    "values",
    [[3.0], [2.0, 1.0], [5.0, 1.0, 4.0], [0.1, 9.0, 0.2, 0.3, 7.5, 1e3, 2.0, 2.0]],
    ids=["one", "two", "three", "eight-with-outlier"],
)
def test_percentile_as_numpy(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(percentile([], 99))


def test_p99_sees_the_one_slow_iteration_p90_would_miss() -> None:
    # 49 iterations at 10 us and one tail iteration at 1000 us: p99 lies between them
    # (10 + 990 * 0.51), p90 reports 10.
    values = [10.0] * 49 + [1000.0]
    assert percentile(values, 99) == pytest.approx(514.9)
    assert percentile(values, 99) > percentile(values, 90) == 10.0


@pytest.mark.parametrize("nranks", [2, 3, 4, 8])
def test_summary_of_fixed_measurements(nranks: int) -> None:
    point = plan_point("all_reduce", 1 << 20, "float", "sum", 0, nranks)
    iters = 100
    # Rank r takes (r + 1) us per iteration, except that the last rank's iteration i
    # takes (i + 1) us more: the slowest rank per iteration is the last one.
    per_rank = []
    for r in range(nranks):
        times = [(r + 1) * 1e-6 for _ in range(iters)]
        if r == nranks - 1:
            times = [t + (i + 1) * 1e-6 for i, t in enumerate(times)]
        per_rank.append(Measurement(times, 0))
    s = summarize(point, per_rank)
    slowest = [nranks + (i + 1) for i in range(iters)]  # us
    assert s.time_us_p50 == pytest.approx(float(np.percentile(slowest, 50)))
    assert s.time_us_p99 == pytest.approx(float(np.percentile(slowest, 99)))
    assert s.time_us_p50 == pytest.approx(nranks + 50.5)
    assert s.time_us_p99 == pytest.approx(nranks + 99.01)
    means = [r + 1 for r in range(nranks - 1)] + [nranks + 50.5]
    mean_us = sum(means) / nranks
    assert s.time_us == pytest.approx(mean_us)
    alg = (1 << 20) / (mean_us * 1e-6) / 1e9
    assert s.algbw_gbps == pytest.approx(alg)
    assert s.busbw_gbps == pytest.approx(alg * 2 * (nranks - 1) / nranks)
    assert s.wrong == 0


def test_summary_mean_from_the_uninstrumented_loop_and_wrong_counts() -> None:
    point = plan_point("all_gather", 4096, "float", "sum", 0, 2)
    a = Measurement([4e-6, 6e-6], 1, mean_s=2e-6)
    b = Measurement([5e-6, 1e-6], 2, mean_s=4e-6)
    s = summarize(point, [a, b])
    assert s.time_us == pytest.approx(3.0)  # mean of the ranks' loop means, not the timed calls
    assert s.time_us_p50 == pytest.approx(5.5)  # slowest per iteration: 5, 6
    assert s.time_us_p99 == pytest.approx(5.99)
    assert s.wrong == 3
    assert summarize(point, [a, Measurement([1e-6, 1e-6], None)]).wrong is None


@pytest.mark.parametrize("ranks", [0, 2], ids=["no-rank", "no-timed-iteration"])
def test_summary_of_nothing_timed_is_zero_time_and_no_percentile(ranks: int) -> None:
    # A point no rank timed (all ranks failed before their loop): time 0 and bandwidth 0
    # (never a made-up time), percentiles unknown (NaN).
    point = plan_point("all_reduce", 1024, "float", "sum", 0, 2)
    s = summarize(point, [Measurement([], None) for _ in range(ranks)])
    assert s.time_us == 0.0 and s.algbw_gbps == 0.0 and s.busbw_gbps == 0.0
    assert math.isnan(s.time_us_p50) and math.isnan(s.time_us_p99)
    assert s.wrong == (0 if ranks == 0 else None)
