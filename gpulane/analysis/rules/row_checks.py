"""Checks over the rows themselves: no wrong results, no error rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulane.analysis.rules.model import FAIL, PASS, SKIP, Check, Context
from gpulane.analysis.rules.select import select_rows


def check_no_wrong(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    """Every checked row has ``wrong == 0``; one wrong element fails."""
    rows = select_rows(ctx.frame, rule.get("select") or {})
    checked = rows[rows["wrong"].notna()]
    if checked.empty:
        status = FAIL if rule.get("required") else SKIP
        return [Check(rule_id, status, "rows", "-", "no row was checked for wrong results")]
    bad = checked[checked["wrong"] > 0]
    if bad.empty:
        return [
            Check(
                rule_id,
                PASS,
                "rows",
                "-",
                f"{len(checked)} checked rows, no wrong elements",
                value=0.0,
                threshold=0.0,
            )
        ]
    out = []
    for subject, group in bad.groupby(bad["host"].fillna(bad["build"]).astype(str), sort=True):
        figs = ", ".join(
            f"{r['figure']} ({int(r['wrong'])} wrong)" for r in group.head(5).to_dict("records")
        )
        more = f" and {len(group) - 5} more" if len(group) > 5 else ""
        out.append(
            Check(
                rule_id,
                FAIL,
                "rows",
                str(subject),
                f"wrong results in {len(group)} row(s): {figs}{more}",
                figure=str(group["figure"].iloc[0]),
                value=float(group["wrong"].sum()),
                threshold=0.0,
            )
        )
    return out


def check_status_ok(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    """Every selected row has status ``ok``."""
    rows = select_rows(ctx.frame, rule.get("select") or {})
    if rows.empty:
        status = FAIL if rule.get("required") else SKIP
        return [Check(rule_id, status, "rows", "-", "no rows")]
    bad = rows[rows["status"] != "ok"]
    if bad.empty:
        return [Check(rule_id, PASS, "rows", "-", f"all {len(rows)} rows ok")]
    out = []
    for subject, group in bad.groupby(bad["host"].fillna(bad["build"]).astype(str), sort=True):
        first = group.iloc[0]
        out.append(
            Check(
                rule_id,
                FAIL,
                "rows",
                str(subject),
                f"{len(group)} row(s) not ok; first: {first['kind']} {first['op']}: "
                f"{first['status']}: {first['error']}",
                figure=str(first["figure"]),
            )
        )
    return out
