"""1-rank collective rows (a sweep on one GPU: busbw 0 by definition) are left out of the
rules and of compare, said once; rows of 2, 4 and 8 GPUs are judged as before, also when
a 1-rank sweep of the same machine sits beside them (a mixed group)."""

from __future__ import annotations

import dataclasses

import pytest

from gpulane.analysis.compare import compare
from gpulane.analysis.rules import FAIL, PASS, SKIP, evaluate
from gpulane.analysis.rules.ranks import ONE_RANK, judged_rows
from gpulane.analysis.store import frame_from_rows
from tests.analysis.rules.rule_sets import rule_set
from tests.analysis.rules.synthetic import collectives, host_copies, machine, topology

ALLOW = ["nccl_transport_matches_path"]


def _lines(verdict, rule: str) -> list:
    return [c for c in verdict.checks if c.rule == rule]


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_one_rank_rows_are_left_out_of_the_rules(n: int) -> None:
    # as a 1-rank sweep times them: algbw, and busbw 0 (nothing crosses a link)
    lone = [dataclasses.replace(r, busbw_gbps=0.0) for r in collectives(1)]
    alone = evaluate(frame_from_rows(machine(n)), rule_set(), topology(n), allow_skip=ALLOW)
    mixed = evaluate(frame_from_rows(machine(n) + lone), rule_set(), topology(n), allow_skip=ALLOW)
    (note,) = _lines(mixed, "collectives")
    assert note.status == SKIP and note.message.startswith(ONE_RANK)
    assert f"({len(lone)} 1-rank collective row(s) left out)" in note.message
    assert not _lines(alone, "collectives")
    # everything else is judged exactly as without the 1-rank rows
    same = [(c.rule, c.status, c.subject, c.message) for c in alone.checks]
    assert same == [(c.rule, c.status, c.subject, c.message) for c in mixed.checks[1:]]
    assert mixed.status == alone.status and not mixed.failed
    busbw = [c for c in mixed.checks if "busbw" in c.rule and c.status in (PASS, FAIL)]
    assert bool(busbw) == (n > 1)  # 2+ GPUs: the collectives are judged, and pass


def test_judged_rows_keep_copies_and_rows_of_unknown_size() -> None:
    frame = frame_from_rows(machine(1) + collectives(1) + collectives(2))
    kept, dropped = judged_rows(frame)
    assert kept is not None and dropped == len(collectives(1))
    assert set(kept["world_size"][kept["kind"] == "collective"]) == {2}
    assert (kept["kind"] == "copy").sum() == (frame["kind"] == "copy").sum()
    assert judged_rows(None) == (None, 0)


def test_compare_leaves_one_rank_rows_out_and_says_so() -> None:
    a = collectives(1, build="a") + collectives(2, build="a")
    b = collectives(1, build="b") + collectives(2, build="b", busbw={"all_reduce": 300.0})
    two_only = compare(
        [("a", frame_from_rows(collectives(2, build="a"))),
         ("b", frame_from_rows(collectives(2, build="b", busbw={"all_reduce": 300.0})))]
    )  # fmt: skip
    both = compare([("a", frame_from_rows(a)), ("b", frame_from_rows(b))])
    assert len(both.table) == len(two_only.table) > 0
    assert list(both.table["b"]) == list(two_only.table["b"])
    assert any(n.startswith(ONE_RANK) and "(12 1-rank" in n for n in both.notes)
    assert not any(ONE_RANK in n for n in two_only.notes)


def test_a_one_rank_collective_is_not_held_to_the_baseline() -> None:
    """The lent 1x H200 under a foreign copy: collective_latency_vs_baseline FAILed on a
    1-rank all_gather (3x the baseline's time); 1-rank rows are no figure of a link."""
    base = [dataclasses.replace(r, busbw_gbps=0.0) for r in collectives(1)] + machine(1)
    slow = [dataclasses.replace(r, busbw_gbps=0.0, time_us=r.time_us * 3) for r in collectives(1)]
    v = evaluate(
        frame_from_rows(slow + machine(1)),
        rule_set(),
        topology(1),
        frame_from_rows(base),
        allow_skip=ALLOW,
    )
    assert not [
        c for c in v.checks if c.rule == "collective_latency_vs_baseline" and c.status == FAIL
    ]
    # the same slow-down on 2 ranks is held to it
    two = [dataclasses.replace(r, time_us=r.time_us * 3) for r in collectives(2)]
    v2 = evaluate(
        frame_from_rows(two + host_copies(2)),
        rule_set(),
        topology(2),
        frame_from_rows(collectives(2) + host_copies(2)),
        allow_skip=ALLOW,
    )
    assert [c for c in v2.checks if c.rule == "collective_latency_vs_baseline" and c.status == FAIL]
