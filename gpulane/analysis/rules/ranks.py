"""Collective rows of one rank: timed, but not a measurement of any link. A collective on
one rank moves nothing between GPUs (its bus bandwidth is 0 by definition: nccl-tests'
busbw factor is (n-1)/n), so rules, compare and reports leave those rows out and say once
why, instead of judging 56 rows of 0.00 GB/s."""

from __future__ import annotations

import pandas as pd

ONE_RANK = "collectives need 2+ ranks: not measured on 1 GPU"


def one_rank(frame: pd.DataFrame) -> pd.Series:
    """True for each collective row of world size 1 (rows of unknown size are kept)."""
    if frame.empty or "kind" not in frame.columns or "world_size" not in frame.columns:
        return pd.Series(False, index=frame.index, dtype=bool)
    size = pd.to_numeric(frame["world_size"], errors="coerce")
    kind = frame["kind"].astype("object").eq("collective")
    return (kind & size.eq(1)).fillna(False).astype(bool)


def judged_rows(frame: pd.DataFrame | None) -> tuple[pd.DataFrame | None, int]:
    """The rows a rule may judge, and how many 1-rank collective rows were left out."""
    if frame is None:
        return None, 0
    drop = one_rank(frame)
    count = int(drop.sum())
    return (frame.loc[~drop] if count else frame), count


def one_rank_note(count: int) -> str:
    return f"{ONE_RANK} ({count} 1-rank collective row(s) left out)"


def without_one_rank(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` less its 1-rank collective rows (what reports and reference lines show)."""
    return frame.loc[~one_rank(frame)]
