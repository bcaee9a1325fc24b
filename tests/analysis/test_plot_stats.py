"""The curves' median, min and max per point (plots.style.median_min_max) are pandas'
groupby aggregation, computed without it: held to pandas itself on the shapes the plots
meet (NaN values, NaN keys, a group of NaN only, mixed batch keys, integer values)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gpulane.analysis.plots.style import median_min_max

NAN = float("nan")


def pandas_stats(frame: pd.DataFrame, key: str, value: str) -> pd.DataFrame:
    return frame.groupby(key)[value].agg(["median", "min", "max"]).sort_index()


@pytest.mark.parametrize(
    "keys, values",
    [
        ([8, 8, 8, 16, 16, 32], [1.0, 9.0, 2.0, 5.5, 4.5, 7.0]),  # odd and even groups
        ([8, 16, NAN, 16, 32, 32], [1.0, NAN, 9.0, 4.0, NAN, NAN]),  # NaN key, NaN-only group
        ([1024, 8, 1024, 8], [3, 4, 10, 1]),  # integer values, keys out of order
        ([2.0**30, 2.0**3], [0.25, 1e-9]),
    ],
)
def test_median_min_max_is_pandas_groupby_agg(keys: list, values: list) -> None:
    frame = pd.DataFrame({"size_bytes": keys, "busbw_gbps": values})
    mine = median_min_max(frame["size_bytes"], frame["busbw_gbps"])
    theirs = pandas_stats(frame, "size_bytes", "busbw_gbps")
    assert list(mine.index) == list(theirs.index)
    assert mine.index.name == "size_bytes"
    for column in ("median", "min", "max"):
        for a, b in zip(mine[column], theirs[column], strict=True):
            assert (math.isnan(a) and math.isnan(b)) or a == b, (column, a, b)


def test_mixed_batch_keys_give_the_same_points() -> None:
    # token rows: a batch is an int, or "-" where the row does not say
    frame = pd.DataFrame({"batch_key": [8, "-", 1, 8, "-"], "v": [2.0, 5.0, 1.0, 4.0, 7.0]})
    mine = median_min_max(frame["batch_key"], frame["v"])
    theirs = frame.groupby("batch_key")["v"].agg(["median", "min", "max"])
    assert sorted(map(str, mine.index)) == sorted(map(str, theirs.index))
    for key in theirs.index:
        assert list(mine.loc[key]) == list(theirs.loc[key]), key
