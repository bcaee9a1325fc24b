"""Outliers among peers: a subject more than ``fraction`` worse than the median of the
others (the same figure in the same build) fails, even when it passes the rule itself.

Exactly ``fraction`` below (or, for a max rule, above) the peers' median still passes.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from gpulane.analysis.rules.measurement import shown_figure
from gpulane.analysis.rules.model import FAIL, PASS, Check, fmt, pct
from gpulane.record import Row, row_value

# (figure key, subject) -> the rows of that figure and subject
Cells = dict[tuple[tuple[str, ...], str], list[Row]]


def is_outlier(margin: float, fraction: float) -> bool:
    """``margin`` is (value - median) / median, signed so that negative is worse."""
    return margin < -fraction


def outliers(
    rule_id: str,
    cells: Mapping[tuple[tuple[str, ...], str], list[Row]],
    metric: str,
    unit: str,
    fraction: float,
    higher_is_better: bool,
    multi_build: bool = False,
) -> list[Check]:
    # Peers are the same figure in the same build (builds are compared by `compare`).
    by_figure: dict[tuple[str, ...], dict[str, float]] = {}
    figures: dict[tuple[str, ...], str] = {}
    for (fkey, subject), recs in cells.items():
        # Where the ranks ran is the subject here, not another measurement: a campaign's
        # pairs of nodes are peers of one figure (hosts would leave each pair alone).
        same = tuple(k for k in fkey if not k.startswith("hosts="))
        key = (*same, subject.split("/", 1)[0] if multi_build else "")
        by_figure.setdefault(key, {})[subject] = float(
            statistics.median(float(row_value(r, metric)) for r in recs)
        )
        figures[key] = shown_figure(recs[0])
    worst: dict[str, Check] = {}
    for key, values in by_figure.items():
        if len(values) < 2:
            continue
        for subject, value in values.items():
            peers = [v for s, v in values.items() if s != subject]
            med = float(statistics.median(peers))
            if med == 0:
                continue
            margin = (value - med) / med if higher_is_better else (med - value) / med
            bad = is_outlier(margin, fraction)
            fig = figures[key]
            direction = "below" if higher_is_better else "above"
            msg = (
                f"{fig}: {fmt(value, unit)} is {pct(margin)} {direction} the median of its "
                f"{len(peers)} peer(s), {fmt(med, unit)} (limit {fraction:.0%})"
                if bad
                else f"{subject} {fig}: {fmt(value, unit)}, peers {fmt(med, unit)}"
            )
            c = Check(
                rule_id,
                FAIL if bad else PASS,
                "outlier",
                subject,
                msg,
                figure=fig,
                value=value,
                threshold=med * (1 - fraction) if higher_is_better else med * (1 + fraction),
                unit=unit,
                margin=margin,
            )
            prev = worst.get(subject)
            if prev is None or (prev.margin is not None and margin < prev.margin):
                worst[subject] = c
    if not worst:
        return []
    failed = [worst[s] for s in sorted(worst) if worst[s].status == FAIL]
    if failed:
        return failed
    # No outlier: one line for the rule, naming the subject closest to the limit.
    closest = min(worst.values(), key=lambda c: c.margin if c.margin is not None else 0.0)
    closest.subject = f"all {len(worst)}"
    closest.message = (
        f"no outlier among {len(worst)}: all within {fraction:.0%} of their peers' median; "
        f"lowest {closest.message}"
    )
    return [closest]
