"""``min`` and ``max`` checks: a metric against an absolute bound, a fraction of the path's
line rate, or a fraction of the baseline; then the outliers among peers.

One value per (measurement, subject): the median over repeats of that one measurement
(:func:`gpulane.analysis.rules.measurement.measurement_key`: a solo copy and the same
GPU's share of an all-GPUs-at-once copy are two measurements, never one median; so are
collectives of other world sizes, node counts or backends). Per basis and subject the
worst measurement decides. A value exactly at its threshold passes (``>=`` for min, ``<=`` for max).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpulane.analysis.rules.linerate import expected_gbps
from gpulane.analysis.rules.measurement import measurement_key, shown_figure
from gpulane.analysis.rules.model import FAIL, PASS, SKIP, Check, Context, fmt, missing_text, pct
from gpulane.analysis.rules.outliers import Cells, outliers
from gpulane.analysis.rules.select import applicable, values
from gpulane.analysis.rules.subjects import subject_of
from gpulane.analysis.store import METRIC_UNITS
from gpulane.errors import InputError
from gpulane.record import Row, frame_rows, row_value

BaselineIndex = dict[tuple[tuple[str, ...], str], float]


def passes(value: float, threshold: float, is_min: bool) -> bool:
    """The comparison every min/max rule makes: at the threshold passes."""
    return value >= threshold if is_min else value <= threshold


def check_min(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    return _threshold_rule(rule_id, rule, ctx, is_min=True)


def check_max(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    return _threshold_rule(rule_id, rule, ctx, is_min=False)


def _bases(rule: Mapping[str, Any], is_min: bool) -> list[tuple[str, float]]:
    """(basis, amount) of each threshold the rule sets."""
    out: list[tuple[str, float]] = []
    absolute = rule.get("min") if is_min else rule.get("max")
    if absolute is not None:
        out.append(("absolute", float(absolute)))
    if is_min and rule.get("min_fraction_of_expected") is not None:
        out.append(("expected", float(rule["min_fraction_of_expected"])))
    frac_base = (
        rule.get("min_fraction_of_baseline") if is_min else rule.get("max_fraction_of_baseline")
    )
    if frac_base is not None:
        out.append(("baseline", float(frac_base)))
    return out


def _threshold_rule(
    rule_id: str, rule: Mapping[str, Any], ctx: Context, is_min: bool
) -> list[Check]:
    frame = ctx.frame
    metric = str(rule["metric"])
    if metric not in frame.columns:
        raise InputError(f"rules.checks.{rule_id}.metric: {metric!r} is not a row column")
    unit = METRIC_UNITS.get(metric, ("", True))[0]
    rows = applicable(rule, frame, ctx.topology)
    rows = rows[(rows["status"] == "ok") & rows[metric].notna()]
    if rows.empty:
        status = FAIL if rule.get("required") else SKIP
        why = "no rows match" + (
            f" (paths {', '.join(values(rule['paths']))})" if rule.get("paths") else ""
        )
        return [Check(rule_id, status, "rows", "-", why, unit=unit)]
    per = str(rule.get("per", "auto"))
    recs_all = frame_rows(rows)
    cells: Cells = {}
    for rec in recs_all:
        subject = subject_of(rec, per, ctx.multi_host, ctx.multi_build)
        cells.setdefault((measurement_key(rec), subject), []).append(rec)
    base_index = (
        _baseline_index(ctx.baseline, metric, per, ctx.multi_host)
        if ctx.baseline is not None
        else None
    )
    out: list[Check] = []
    for basis, amount in _bases(rule, is_min):
        if basis == "baseline" and base_index is None:
            out.append(Check(rule_id, SKIP, basis, "-", missing_text("baseline"), unit=unit))
            continue
        worst: dict[str, Check] = {}
        for (key, subject), recs in cells.items():
            c = _cell_check(
                rule_id, basis, amount, key, subject, recs, metric, unit, is_min, ctx, base_index
            )
            prev = worst.get(subject)
            if c.status == SKIP:
                worst.setdefault(subject, c)
            elif (
                prev is None
                or prev.status == SKIP
                or (prev.margin is not None and c.margin is not None and c.margin < prev.margin)
            ):
                worst[subject] = c
        out.extend(worst[s] for s in sorted(worst))

    fraction = rule.get("outlier_fraction", ctx.default_outlier)
    if fraction is not None and fraction is not False:
        out.extend(outliers(rule_id, cells, metric, unit, float(fraction), is_min, ctx.multi_build))
    if not out:
        out.append(
            Check(
                rule_id, SKIP, "rows", "-", "rule has no threshold and no outlier check", unit=unit
            )
        )
    return out


def _cell_check(
    rule_id: str,
    basis: str,
    amount: float,
    key: tuple[str, ...],
    subject: str,
    recs: list[Row],
    metric: str,
    unit: str,
    is_min: bool,
    ctx: Context,
    base_index: BaselineIndex | None,
) -> Check:
    """One figure of one subject against one basis."""
    value = float(statistics.median(float(row_value(r, metric)) for r in recs))
    # the words say which measurement it was when it is not a solo copy
    fig = shown = shown_figure(recs[0])
    if basis == "absolute":
        threshold = amount
        how = ("at least " if is_min else "at most ") + fmt(amount, unit)
    else:
        if basis == "expected":
            ref, src = expected_gbps(recs[0], ctx.topology)
            missing = f"expected bandwidth unknown ({src})"
            of = f"{fmt(ref, 'GB/s')} ({src})"
        else:
            assert base_index is not None
            ref = base_index.get((key, subject))
            if ref is None and ctx.multi_build:
                ref = base_index.get((key, subject.split("/", 1)[1]))
            if ref is None:
                ref = base_index.get((key, "*"))
            missing = "not in the baseline"
            of = f"baseline {fmt(ref, unit)}"
        if ref is None:
            return Check(
                rule_id,
                SKIP,
                basis,
                subject,
                f"{shown}: {missing}",
                figure=fig,
                value=value,
                unit=unit,
            )
        threshold = amount * ref
        how = f"{amount:g} x {of}"
    margin = (value - threshold) / threshold if threshold else 0.0
    ok = passes(value, threshold, is_min)
    if not is_min:
        margin = -margin
    if ok:
        msg = (
            f"{shown}: {fmt(value, unit)} {'>=' if is_min else '<='} {fmt(threshold, unit)} ({how})"
        )
    else:
        msg = (
            f"{shown}: {fmt(value, unit)} is {pct(margin)} {'below' if is_min else 'above'} "
            f"{fmt(threshold, unit)} ({how})"
        )
    return Check(
        rule_id,
        PASS if ok else FAIL,
        basis,
        subject,
        msg,
        figure=fig,
        value=value,
        threshold=threshold,
        unit=unit,
        margin=margin,
    )


def _baseline_index(
    baseline: pd.DataFrame, metric: str, per: str, multi_host: bool
) -> BaselineIndex:
    """The baseline's figure per (measurement, subject), and per measurement (``*``)."""
    if metric not in baseline.columns:
        return {}
    rows = baseline[(baseline["status"] == "ok") & baseline[metric].notna()]
    index: BaselineIndex = {}
    if rows.empty:
        return index
    groups: dict[tuple[tuple[str, ...], str], list[float]] = {}
    for rec in frame_rows(rows):
        key = measurement_key(rec)
        value = float(row_value(rec, metric))
        groups.setdefault((key, subject_of(rec, per, multi_host)), []).append(value)
        groups.setdefault((key, "*"), []).append(value)
    return {k: float(statistics.median(v)) for k, v in groups.items()}
