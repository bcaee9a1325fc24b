"""A run on a GPU that someone else was using: the rows say so (``extra.foreign``, written
from the pre-flight NVML reading: GPU -> the other processes on it, in words), and its
figures describe a shared GPU, not the machine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulane.analysis.rules.model import FAIL, PASS, SKIP, Check, Context
from gpulane.analysis.rules.select import select_rows


def check_no_foreign(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    """Fail per GPU that another process used during the run (per host); pass when the
    pre-flight saw none. Rows from runs that did not read the GPUs are not a pass."""
    every = ctx.all_rows if ctx.all_rows is not None else ctx.frame  # 1-rank rows read too
    rows = select_rows(every, rule.get("select") or {})
    if "extra" not in rows:
        return [Check(rule_id, SKIP, "rows", "-", "no rows")]
    rows = rows[rows["kind"].isin(("collective", "copy", "tokens"))]
    busy: dict[tuple[str, str], str] = {}
    read = 0  # rows whose GPUs were read (extra.foreign present, {} when nothing else ran)
    for host, extra in zip(rows["host"].fillna("-"), rows["extra"], strict=True):
        foreign = (extra or {}).get("foreign") if isinstance(extra, dict) else None
        if foreign is None:
            continue
        read += 1
        for gpu, words in foreign.items():
            busy.setdefault((str(host), str(gpu)), str(words))
    if busy:
        return [
            Check(
                rule_id,
                FAIL,
                "rows",
                gpu if host == "-" else f"{host}:{gpu}",
                f"measured while another process used the GPU: {words}",
            )
            for (host, gpu), words in sorted(busy.items())
        ]
    if not read:
        status = FAIL if rule.get("required") else SKIP
        return [
            Check(
                rule_id,
                status,
                "rows",
                "-",
                "no row says what else ran on its GPUs (CPU rows, or rows measured before "
                "gpulane read the GPUs through NVML)",
            )
        ]
    return [
        Check(
            rule_id,
            PASS,
            "rows",
            "-",
            f"no other process on the GPUs when the {read} row(s) that read them were measured",
        )
    ]
