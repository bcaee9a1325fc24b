"""Rules compare like with like: solo copies against the link, all-GPUs-at-once copies as a
check of their own, repeats combined, other measurements never; on rows of 1, 2, 3, 4
and 8 GPUs, mixed builds, and the 4x H200 of issue 28."""

from __future__ import annotations

from typing import Any

import pytest

from gpulane.analysis.rules import FAIL, PASS, SKIP, evaluate
from gpulane.analysis.rules.measurement import copy_mode, measurement_key
from gpulane.analysis.store import frame_from_rows
from gpulane.record import Row, frame_rows
from tests.analysis.rules.rule_sets import rule_set
from tests.analysis.rules.synthetic import (
    GEN5_X16,
    GIB,
    collectives,
    host_copies,
    machine,
    peer_copies,
    topology,
)

# nccl-tests/synthetic rows carry no NCCL INFO account: accepted knowingly here
NO_INFO = ["nccl_transport_matches_path"]


def verdict(rows: list[Row], n: int, **kw: Any) -> Any:
    return evaluate(
        frame_from_rows(rows), rule_set(), topology(n), allow_skip=kw.pop("allow", NO_INFO), **kw
    )


def lines(v: Any, rule: str, status: str | None = None) -> list[Any]:
    return [c for c in v.checks if c.rule == rule and (status is None or c.status == status)]


def test_the_4_gpu_h200_of_issue_28_passes() -> None:
    """Solo 55.4 GB/s, all four at once 40-42 H2D and 32-34 D2H each, Gen5 x16 each."""
    shares: dict[str, float | list[float]] = {
        "h2d": [42.3, 41.6, 40.9, 40.2],
        "d2h": [34.0, 33.4, 32.8, 32.2],
    }
    rows = host_copies(4, solo=55.41, at_once=shares) + collectives(4) + peer_copies(4)
    v = verdict(rows, 4)
    assert v.status == "PASS", [c.message for c in v.failed] + [m.rule for m in v.unmet]
    h2d = {c.subject: c for c in lines(v, "pinned_h2d", PASS) if c.basis == "expected"}
    assert set(h2d) == {"GPU0", "GPU1", "GPU2", "GPU3"}
    # the solo figure alone, never the median of solo and all-at-once (48.85 in the issue)
    assert [c.value for c in h2d.values()] == pytest.approx([55.41] * 4)
    assert h2d["GPU0"].threshold == pytest.approx(0.8 * GEN5_X16, rel=1e-3)
    (total,) = lines(v, "pinned_h2d_all_gpus", PASS)
    assert total.value == pytest.approx(42.3 + 41.6 + 40.9 + 40.2)
    assert total.threshold == pytest.approx(0.45 * 4 * GEN5_X16)
    assert "total of 4 GPUs at once" in total.message
    (d2h_total,) = lines(v, "pinned_d2h_all_gpus", PASS)
    assert d2h_total.value == pytest.approx(34.0 + 33.4 + 32.8 + 32.2)


def test_one_gpu_short_on_its_solo_copy_fails_naming_it() -> None:
    rows = host_copies(4, gpu_solo={"GPU2": 44.0}) + collectives(4) + peer_copies(4)
    v = verdict(rows, 4)
    assert v.status == "FAIL"
    bad = lines(v, "pinned_h2d", FAIL)
    assert {c.subject for c in bad} == {"GPU2"}
    expected = next(c for c in bad if c.basis == "expected")
    assert expected.value == pytest.approx(44.0) and "below" in expected.message
    # the outlier among its peers names it too; the all-at-once totals are untouched
    assert any(c.basis == "outlier" for c in bad)
    assert lines(v, "pinned_h2d_all_gpus", PASS)


def test_a_host_that_cannot_feed_all_gpus_fails_the_all_at_once_check_only() -> None:
    rows = host_copies(4, at_once={"h2d": 25.0, "d2h": 26.0}) + collectives(4) + peer_copies(4)
    v = verdict(rows, 4)
    assert v.failed_rules() == ["pinned_d2h_all_gpus", "pinned_h2d_all_gpus"]
    (c,) = lines(v, "pinned_h2d_all_gpus", FAIL)
    assert c.value == pytest.approx(100.0) and c.subject == "all"
    assert lines(v, "pinned_h2d", PASS)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_healthy_machines_of_1_to_8_gpus_pass(n: int) -> None:
    v = verdict(machine(n), n)
    assert v.status == "PASS", [c.message for c in v.failed] + [m.rule for m in v.unmet]
    solo = lines(v, "pinned_d2h", PASS)
    assert {c.subject for c in solo if c.basis == "expected"} == {f"GPU{i}" for i in range(n)}
    # one GPU has no all-at-once rows, and does not need them; more do
    at_once = lines(v, "pinned_h2d_all_gpus")
    assert (at_once[0].status == SKIP) if n == 1 else (at_once[0].status == PASS)
    assert not v.missing or [m.rule for m in v.missing] == NO_INFO


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_missing_all_at_once_rows_make_a_multi_gpu_run_incomplete(n: int) -> None:
    rows = [r for r in machine(n) if (r.extra or {}).get("test") != "all-gpus"]
    v = verdict(rows, n)
    assert v.status == "INCOMPLETE"
    assert {m.rule for m in v.unmet} == {"pinned_h2d_all_gpus", "pinned_d2h_all_gpus"}
    assert "all_gpus=true" in v.unmet[0].supply


def test_repeats_are_combined_other_measurements_never() -> None:
    # three repeats of GPU0's solo 1 GiB copy: 50, 56, 57 -> the median 56 passes
    rows = host_copies(2, repeats=3)
    solo_gpu0 = [r for r in rows if r.op == "h2d" and r.dst == "GPU0" and r.size_bytes == GIB
                 and not (r.extra or {}).get("test")]  # fmt: skip
    for r, value in zip(solo_gpu0, (50.0, 56.0, 57.0), strict=True):
        r.algbw_gbps = r.busbw_gbps = value
    v = verdict(rows + collectives(2) + peer_copies(2), 2)
    (c,) = [c for c in lines(v, "pinned_h2d") if c.subject == "GPU0" and c.basis == "expected"]
    assert c.value == pytest.approx(56.0) and c.status == PASS
    # the solo row and the same GPU's all-at-once share are two measurements
    frame = frame_from_rows(rows)
    at_1g = [r for r in frame_rows(frame) if r.dst == "GPU0" and r.size_bytes == GIB]
    keys = {copy_mode(r): measurement_key(r) for r in at_1g}
    assert set(keys) == {"solo", "concurrent"} and keys["solo"] != keys["concurrent"]
    assert len({measurement_key(r) for r in at_1g if copy_mode(r) == "solo"}) == 1


def test_pageable_copies_are_not_held_to_the_pinned_rule() -> None:
    rows = machine(2) + host_copies(2, solo=12.0, memory="pageable")
    v = verdict(rows, 2)
    assert v.status == "PASS"
    assert all(c.value > 50 for c in lines(v, "pinned_h2d") if c.basis == "expected")


def test_collectives_of_other_world_sizes_are_judged_apart() -> None:
    # an 8-GPU box swept on 8 and on 2 GPUs: 2 GPUs reach less busbw; no median of the two
    rows = machine(8) + collectives(2, busbw={"all_reduce": 300.0, "all_gather": 250.0})
    v = verdict(rows, 8)
    ar = lines(v, "all_reduce_busbw_nvlink")
    assert v.status == "PASS" and ar[0].status == PASS
    assert ar[0].value == pytest.approx(300.0)  # the worst measurement decides, unmixed
    slow = collectives(2, busbw={"all_reduce": 100.0})
    v = verdict(machine(8) + slow, 8)
    (c,) = lines(v, "all_reduce_busbw_nvlink", FAIL)
    assert c.value == pytest.approx(100.0)


def test_mixed_builds_are_checked_apart() -> None:
    good = machine(4)
    slow = host_copies(4, gpu_solo={"GPU1": 40.0}, build="riser-b")
    slow += collectives(4, build="riser-b") + peer_copies(4, build="riser-b")
    v = verdict(good + slow, 4)
    bad = {c.subject for c in lines(v, "pinned_h2d", FAIL)}
    assert bad == {"riser-b/GPU1"}
    assert any(c.subject == "h200/GPU1" for c in lines(v, "pinned_h2d", PASS))


def test_a_copy_rule_without_mode_looks_at_solo_rows_only() -> None:
    spec = {
        "checks": {
            "h2d": {
                "check": "min",
                "select": {"kind": "copy", "op": "h2d", "size": "max"},
                "metric": "algbw_gbps",
                "min": 50,
            }
        }
    }
    v = evaluate(frame_from_rows(host_copies(4)), spec, topology(4))
    assert v.status == "PASS" and [c.value for c in v.checks] == pytest.approx([55.4] * 4)
    spec["checks"]["h2d"]["select"]["mode"] = "concurrent"
    v = evaluate(frame_from_rows(host_copies(4)), spec, topology(4))
    assert v.status == "FAIL" and [c.value for c in v.checks] == pytest.approx([41.0] * 4)


def test_collectives_on_other_hosts_or_paths_are_judged_apart() -> None:
    """A campaign's pairs: rank 0 on node a both times, with b (fine) and with c (slow)."""
    spec = {
        "checks": {
            "busbw": {
                "check": "min",
                "select": {"kind": "collective", "op": "all_reduce", "size": "1G"},
                "metric": "busbw_gbps",
                "min": 40,
                "outlier_fraction": False,
            }
        }
    }
    rows = []
    for peer, gbps in (("b", 45.0), ("c", 10.0), ("d", 46.0)):
        for r in collectives(16, busbw={"all_reduce": gbps}, host="a", nodes=2, path="NET"):
            r.extra = {"hosts": ["a", peer]}
            rows.append(r)
    (c,) = evaluate(frame_from_rows(rows), spec).checks
    # the median of the three (45) would pass; the pair with c is its own measurement
    assert c.status == FAIL and c.value == pytest.approx(10.0) and c.subject == "a"
    frame = frame_from_rows(collectives(2, path="NV18") + collectives(2, path="PIX"))
    keys = {measurement_key(r) for r in frame_rows(frame) if r.size_bytes == GIB}
    assert len(keys) == 4  # two ops x two paths


def test_latency_copies_are_not_bandwidth_repeats() -> None:
    rows = peer_copies(2)
    lat = [r for r in peer_copies(2, gbps=0.001)]
    for r in lat:
        r.extra = {"test": "latency"}
    frame = frame_from_rows(rows + lat)
    keys = {measurement_key(r) for r in frame_rows(frame)}
    assert len(keys) == 2


def test_two_hosts_of_one_build_are_checked_per_host() -> None:
    """Two 4-GPU nodes in one build: each node's GPUs are subjects of their own, and one
    node's all-at-once total is never pooled with the other's."""
    a = host_copies(4, host="node-a")
    b = host_copies(4, host="node-b", gpu_solo={"GPU1": 41.0}, at_once={"h2d": 20.0})
    v = verdict(a + b + collectives(4, host="node-a") + peer_copies(4, host="node-a"), 4)
    assert {c.subject for c in lines(v, "pinned_h2d", FAIL)} == {"node-b:GPU1"}
    totals = {c.subject: c for c in lines(v, "pinned_h2d_all_gpus") if c.basis == "expected"}
    assert totals["node-a:all"].status == PASS and totals["node-b:all"].status == FAIL
    assert totals["node-b:all"].value == pytest.approx(80.0)
