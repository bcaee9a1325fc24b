"""Every shipped acceptance rule at, just below and just above its threshold.

The thresholds are written out here from the rule sets (gpulane/conf/rules/*.yaml) and
the definitions of the line rates (PCIe Gen4: 1.969 GB/s per lane and direction; NVLink:
links x the measured per-link rate), not asked of the code. A value exactly at its
threshold passes; one ulp to the wrong side fails; so turning any ``>=`` of a check into
``>`` (or ``<`` into ``<=``) fails a test here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from gpulane.analysis.rules import FAIL, PASS, SKIP, Check, Verdict, evaluate
from gpulane.analysis.store import frame_from_rows
from gpulane.record import Row
from tests.analysis.rules.rule_sets import rule_set

GIB, MIB, KIB = 1 << 30, 1 << 20, 1 << 10
NV4 = 4 * 25.0  # four NVLinks measured at 25 GB/s each (A100)
GEN4_X16 = 16 * 1.969  # PCIe Gen4 x16, per direction after 128b/130b encoding


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


def above(x: float) -> float:
    return math.nextafter(x, math.inf)


def topology(label: str) -> dict[str, Any]:
    """Two A100s at Gen4 x16 (at their maximum), joined by ``label``."""
    nv = label.startswith("NV")
    gpus = [
        {
            "name": f"GPU{i}",
            "index": i,
            "model": "NVIDIA A100-SXM4-80GB",
            "pcie": {"gen": 4, "gen_max": 4, "width": 16, "width_max": 16, "downtrained": False},
            "nvlinks": {str(k): 25.0 for k in range(4)} if nv else None,
        }
        for i in range(2)
    ]
    pair = {"a": "GPU0", "b": "GPU1", "label": label, "nvlinks": 4 if nv else None}
    return {"gpus": gpus, "nics": [], "pairs": [pair], "warnings": []}


def collective(op: str, size: int, host: str = "node1", in_place: bool = False, **kw: Any) -> Row:
    return Row(
        run_id="r", kind="collective", backend="nccl-tests", op=op, build="b", host=host,
        world_size=2, dtype="float", redop="sum", in_place=in_place, size_bytes=size,
        count=size // 4, **kw,
    )  # fmt: skip


def copy(op: str, gbps: float, src: str, dst: str, **kw: Any) -> Row:
    return Row(
        run_id="r", kind="copy", backend="gpulane", op=op, build="b", host="node1",
        memory="pinned", bidirectional=False, src=src, dst=dst, size_bytes=GIB,
        algbw_gbps=gbps, busbw_gbps=gbps, peer_access=True if op == "p2p" else None, **kw,
    )  # fmt: skip


def tokens(rate: float) -> Row:
    return Row(
        run_id="r", kind="tokens", backend="torch-nccl", op="decode", build="b", host="node1",
        model="m", dtype="bfloat16", tp=2, pp=1, batch=8, input_len=128, output_len=128,
        tokens_per_s=rate,
    )  # fmt: skip


def lines(v: Verdict, rule: str, basis: str | None = None) -> list[Check]:
    return [c for c in v.checks if c.rule == rule and (basis is None or c.basis == basis)]


def one(v: Verdict, rule: str, basis: str) -> Check:
    (c,) = lines(v, rule, basis)
    return c


# -- fractions of the line rate --------------------------------------------------------------

RowsOf = Callable[[float], list[Row]]
LINE_RATE_RULES: list[tuple[str, float, str, RowsOf]] = [
    # rule, its threshold written out, the path, rows carrying the value
    ("all_reduce_busbw_nvlink", 0.6 * NV4, "NV4",
     lambda v: [collective("all_reduce", GIB, busbw_gbps=v)]),
    ("all_gather_busbw_nvlink", 0.45 * NV4, "NV4",
     lambda v: [collective("all_gather", GIB, busbw_gbps=v)]),
    ("p2p_copy_nvlink", 0.5 * NV4, "NV4", lambda v: [copy("p2p", v, "GPU0", "GPU1")]),
    ("pinned_h2d", 0.80 * GEN4_X16, "PIX", lambda v: [copy("h2d", v, "host", "GPU0")]),
    ("pinned_d2h", 0.8 * GEN4_X16, "PIX", lambda v: [copy("d2h", v, "GPU1", "host")]),
    ("p2p_copy_pcie", 0.6 * GEN4_X16, "PIX", lambda v: [copy("p2p", v, "GPU1", "GPU0")]),
    ("all_reduce_busbw_pcie", 0.35 * GEN4_X16, "PIX",
     lambda v: [collective("all_reduce", GIB, busbw_gbps=v)]),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "threshold", "label", "rows_of"), LINE_RATE_RULES)
@pytest.mark.parametrize(("side", "status"), [("at", PASS), ("below", FAIL), ("above", PASS)])
def test_fraction_of_the_line_rate(
    rule: str, threshold: float, label: str, rows_of: RowsOf, side: str, status: str
) -> None:
    value = {"at": threshold, "below": below(threshold), "above": above(threshold)}[side]
    v = evaluate(frame_from_rows(rows_of(value)), rule_set(), topology(label))
    c = one(v, rule, "expected")
    assert (c.status, c.value, c.threshold) == (status, value, threshold)
    assert (c.margin or 0.0) < 0 if status == FAIL else (c.margin or 0.0) >= 0
    assert ("below" in c.message) == (status == FAIL)


# -- fractions of the baseline ---------------------------------------------------------------

BASELINE_RULES: list[tuple[str, float, bool, RowsOf]] = [
    # rule, fraction, a min rule?, rows; the baseline holds the same rows at 200
    ("collective_busbw_vs_baseline", 0.9, True,
     lambda v: [collective("all_reduce", 64 * MIB, busbw_gbps=v)]),  # size_min 64M: included
    ("collective_latency_vs_baseline", 2.0, False,
     lambda v: [collective("all_reduce", 64 * KIB, time_us=v)]),  # size_max 64K: included
    ("copy_vs_baseline", 0.9, True, lambda v: [copy("h2d", v, "host", "GPU0")]),
    ("tokens_vs_baseline", 0.9, True, lambda v: [tokens(v)]),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "fraction", "is_min", "rows_of"), BASELINE_RULES)
@pytest.mark.parametrize("side", ["at", "below", "above"])
def test_fraction_of_the_baseline(
    rule: str, fraction: float, is_min: bool, rows_of: RowsOf, side: str
) -> None:
    threshold = fraction * 200.0
    value = {"at": threshold, "below": below(threshold), "above": above(threshold)}[side]
    bad_side = "below" if is_min else "above"
    baseline = frame_from_rows(rows_of(200.0))
    v = evaluate(frame_from_rows(rows_of(value)), rule_set(), None, baseline=baseline)
    c = one(v, rule, "baseline")
    assert (c.value, c.threshold) == (value, threshold)
    assert c.status == (FAIL if side == bad_side else PASS), c.message


def test_size_bounds_include_their_ends() -> None:
    """size_min 64M and size_max 64K take rows at exactly those sizes, not one byte past."""
    base = frame_from_rows(
        [
            collective("all_reduce", s, busbw_gbps=200.0, time_us=10.0)
            for s in (64 * MIB - 4, 64 * KIB + 4)
        ]
    )
    rows = [
        collective("all_reduce", s, busbw_gbps=1.0, time_us=1e6)
        for s in (64 * MIB - 4, 64 * KIB + 4)
    ]
    v = evaluate(frame_from_rows(rows), rule_set(), None, baseline=base)
    for rule in ("collective_busbw_vs_baseline", "collective_latency_vs_baseline"):
        assert [(c.status, c.message) for c in lines(v, rule)] == [(SKIP, "no rows match")]


# -- absolute bounds -----------------------------------------------------------------------


@pytest.mark.parametrize(("check", "bound"), [("min", 340.0), ("max", 10.0)])
@pytest.mark.parametrize("side", ["at", "below", "above"])
def test_absolute_bounds(check: str, bound: float, side: str) -> None:
    metric = "busbw_gbps" if check == "min" else "time_us"
    value = {"at": bound, "below": below(bound), "above": above(bound)}[side]
    spec = {
        "outlier_fraction": None,
        "checks": {
            "r": {"check": check, "metric": metric, "select": {"kind": "collective"}, check: bound}
        },
    }
    v = evaluate(frame_from_rows([collective("all_reduce", GIB, **{metric: value})]), spec)
    c = one(v, "r", "absolute")
    bad_side = "below" if check == "min" else "above"
    assert (c.status, c.threshold) == (FAIL if side == bad_side else PASS, bound)


# -- outliers among peers (the rule set's outlier_fraction: 0.10) ----------------------------


@pytest.mark.parametrize("side", ["at", "below", "above"])
def test_outlier_fraction_of_a_min_rule(side: str) -> None:
    """node3 exactly 10% below its peers' median (100) is not an outlier; one ulp less is."""
    value = {"at": 90.0, "below": below(90.0), "above": above(90.0)}[side]
    rows = [
        collective("all_reduce", GIB, host=h, busbw_gbps=b)
        for h, b in (("node1", 100.0), ("node2", 100.0), ("node3", value))
    ]
    v = evaluate(frame_from_rows(rows), rule_set(), topology("NV4"))
    outliers = lines(v, "all_reduce_busbw_nvlink", "outlier")
    if side == "below":
        assert [(c.status, c.subject, c.threshold) for c in outliers] == [
            (FAIL, "node3", 100.0 * (1 - 0.10))
        ]
    else:
        assert [(c.status, c.subject) for c in outliers] == [(PASS, "all 3")]
        assert "node3" in outliers[0].message  # the one closest to the limit


@pytest.mark.parametrize("side", ["at", "below", "above"])
def test_outlier_fraction_of_a_max_rule(side: str) -> None:
    """A time 10% above its peers' median (10 us) is not an outlier; one ulp more is."""
    value = {"at": 11.0, "below": below(11.0), "above": above(11.0)}[side]
    spec = {
        "outlier_fraction": 0.10,
        "checks": {"t": {"check": "max", "metric": "time_us", "select": {"kind": "collective"}}},
    }
    rows = [
        collective("all_reduce", 8, host=h, time_us=t)
        for h, t in (("node1", 10.0), ("node2", 10.0), ("node3", value))
    ]
    failed = [
        c.subject
        for c in lines(evaluate(frame_from_rows(rows), spec), "t", "outlier")
        if c.status == FAIL
    ]
    assert failed == (["node3"] if side == "above" else [])


def test_two_subjects_are_peers() -> None:
    rows = [
        collective("all_reduce", GIB, host=h, busbw_gbps=b) for h, b in (("a", 100.0), ("b", 80.0))
    ]
    v = evaluate(frame_from_rows(rows), rule_set(), topology("NV4"))
    assert [(c.status, c.subject) for c in lines(v, "all_reduce_busbw_nvlink", "outlier")] == [
        (FAIL, "b")
    ]


# -- rows ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("wrong", "status"), [(0, PASS), (1, FAIL)])
def test_no_wrong_results(wrong: int, status: str) -> None:
    """Zero wrong elements is the threshold: it passes, a single one fails."""
    v = evaluate(
        frame_from_rows([collective("all_reduce", 8, busbw_gbps=1.0, wrong=wrong)]), rule_set()
    )
    assert [c.status for c in lines(v, "no_wrong_results")] == [status]


@pytest.mark.parametrize(("row_status", "status"), [("ok", PASS), ("error", FAIL), ("wrong", FAIL)])
def test_rows_ok(row_status: str, status: str) -> None:
    v = evaluate(frame_from_rows([collective("all_reduce", 8, status=row_status)]), rule_set())
    assert [c.status for c in lines(v, "rows_ok")] == [status]


# -- topology ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gen", "width", "marked", "status"),
    [
        (4, 16, False, PASS),  # at its maximum
        (3, 16, False, FAIL),  # one generation below
        (5, 16, False, PASS),  # reads above the maximum a source gave: not downtrained
        (4, 8, False, FAIL),  # narrower
        (4, 15, False, FAIL),  # one lane below
        (4, 32, False, PASS),
        (4, 16, True, FAIL),  # a source marked it downtrained
    ],
)
@pytest.mark.parametrize("where", ["gpu", "upstream"])
def test_pcie_max_link(gen: int, width: int, marked: bool, status: str, where: str) -> None:
    data = topology("NV4")
    link = {"gen": gen, "gen_max": 4, "width": width, "width_max": 16, "downtrained": marked}
    if where == "gpu":
        data["gpus"][1]["pcie"] = link
        subject = "GPU1"
    else:
        data["gpus"][1]["pcie_upstream"] = [
            {"bus_id": "0000:40:01.1", "device": "root port", **link}
        ]
        subject = "GPU1 upstream 0000:40:01.1"
    v = evaluate(frame_from_rows([]), rule_set(), data)
    by_subject = {c.subject: c.status for c in lines(v, "pcie_max_link")}
    assert by_subject[subject] == status
    assert [s for s, st in by_subject.items() if st == FAIL] == (
        [subject] if status == FAIL else []
    )


@pytest.mark.parametrize(
    ("p2p", "status"),
    [
        ({"r": "OK", "w": "OK"}, PASS),
        ({"read": "OK", "write": "CNS"}, FAIL),
        ({"r": "ok"}, PASS),  # case as the capture wrote it
        ({"r": "OK", "atomics": "NS"}, PASS),  # atomics is not a mode the rule asks for
        ({"atomics": "NS"}, SKIP),
        ("OK", PASS),  # one status for every mode (older files)
    ],
)
def test_p2p_ok(p2p: Any, status: str) -> None:
    data = topology("NV4")
    data["pairs"][0]["p2p"] = p2p
    v = evaluate(frame_from_rows([]), rule_set(), data)
    assert [(c.subject, c.status) for c in lines(v, "p2p_ok")] == [("GPU0-GPU1", status)]


# -- which figure a line names -------------------------------------------------------------


def test_the_worst_figure_decides_and_a_tie_keeps_the_first() -> None:
    spec = {
        "outlier_fraction": None,
        "checks": {
            "r": {
                "check": "min",
                "metric": "busbw_gbps",
                "select": {"kind": "collective"},
                "min": 100.0,
            }
        },
    }
    values = [(GIB, False, 60.0), (GIB, True, 50.0), (2 * GIB, False, 55.0)]
    rows = [collective("all_reduce", s, in_place=p, busbw_gbps=b) for s, p, b in values]
    assert one(evaluate(frame_from_rows(rows), spec), "r", "absolute").figure == (
        "all_reduce float 1 GiB in-place"
    )
    tie = [collective("all_reduce", GIB, in_place=p, busbw_gbps=50.0) for p in (False, True)]
    assert one(evaluate(frame_from_rows(tie), spec), "r", "absolute").figure == (
        "all_reduce float 1 GiB"
    )


def test_an_outlier_in_two_figures_is_named_once_by_the_first() -> None:
    rows = [
        collective("all_reduce", GIB, host=h, in_place=p, busbw_gbps=b)
        for p in (False, True)
        for h, b in (("node1", 100.0), ("node2", 100.0), ("node3", 80.0))
    ]
    v = evaluate(frame_from_rows(rows), rule_set(), topology("NV4"))
    ((subject, figure),) = [
        (c.subject, c.figure)
        for c in lines(v, "all_reduce_busbw_nvlink", "outlier")
        if c.status == FAIL
    ]
    assert (subject, figure) == ("node3", "all_reduce float 1 GiB")


@pytest.mark.parametrize(("bad", "more"), [(5, ""), (6, " and 1 more")])
def test_wrong_rows_are_listed_up_to_five(bad: int, more: str) -> None:
    rows = [collective("all_reduce", 8 << i, busbw_gbps=1.0, wrong=1) for i in range(bad)]
    (c,) = lines(evaluate(frame_from_rows(rows), rule_set()), "no_wrong_results")
    assert c.message.startswith(f"wrong results in {bad} row(s): all_reduce float 8 B (1 wrong)")
    assert c.message.endswith(f"all_reduce float 128 B (1 wrong){more}")


@pytest.mark.parametrize(("rule", "fraction", "is_min", "rows_of"), BASELINE_RULES)
def test_the_by_column_reads_as_the_figures_beside_it(
    rule: str, fraction: float, is_min: bool, rows_of: RowsOf
) -> None:
    """A figure 50 % over its threshold reads "+50.0%" in the tables' "by" column, for a
    minimum (passes) and a maximum (fails) alike; ``margin`` keeps "negative is worse"
    for ordering. (The column showed ``margin``: a latency over its maximum read -50 %.)"""
    from gpulane.analysis.report.checks import rules_table
    from gpulane.campaigns.accept.output import verdict_table

    threshold = fraction * 200.0
    baseline = frame_from_rows(rows_of(200.0))
    v = evaluate(frame_from_rows(rows_of(1.5 * threshold)), rule_set(), None, baseline=baseline)
    c = one(v, rule, "baseline")
    assert c.offset_text() == "+50.0%"
    assert c.margin == pytest.approx(0.5 if is_min else -0.5)
    assert c.status == (PASS if is_min else FAIL)
    assert list(verdict_table(Verdict(checks=[c]))["by"]) == ["+50.0%"]
    assert "+50.0%" in rules_table(Verdict(checks=[c]))
