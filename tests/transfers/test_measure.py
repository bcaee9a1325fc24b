"""The copy timer's arithmetic on fixed inputs: a timed sample of ``reps`` back-to-back
copies is one copy's time times ``reps`` (the GPU run of the same is in test_gpu.py)."""

from __future__ import annotations

import pytest

from gpulane.transfers.measure import per_copy_us
from gpulane.transfers.sizes import reps_for


def test_one_copy_per_sample() -> None:
    assert per_copy_us([0.5, 0.25], 1) == [500.0, 250.0]


@pytest.mark.parametrize("reps", [2, 3, 7, 64])
def test_a_sample_of_many_copies_is_divided_by_their_number(reps: int) -> None:
    # Elapsed ms of samples of `reps` copies of 40 us each, and one slower sample.
    samples_ms = [0.040 * reps, 0.040 * reps, 0.100 * reps]
    assert per_copy_us(samples_ms, reps) == pytest.approx([40.0, 40.0, 100.0])


def test_reps_of_a_small_copy_and_its_time() -> None:
    # 64 KiB copies, 1 MiB per sample: 16 copies per sample; a sample of 2.4 ms is 150 us each.
    reps = reps_for(64 << 10, 1 << 20, 64)
    assert reps == 16
    assert per_copy_us([2.4], reps) == pytest.approx([150.0])
    assert reps_for(64 << 10, 1 << 20, 4) == 4  # max_reps caps it
    assert per_copy_us([2.4], 4) == pytest.approx([600.0])


def test_no_copies_is_refused() -> None:
    with pytest.raises(ValueError, match="reps must be >= 1"):
        per_copy_us([1.0], 0)
