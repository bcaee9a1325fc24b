"""A failed figure on a GPU with foreign work, throttled clocks or a downtrained link
names that likely cause in its own line (copies, collectives), on 1, 2, 4 and 8 GPUs."""

from __future__ import annotations

import dataclasses

import pytest

from gpulane.analysis.rules import FAIL, evaluate
from gpulane.analysis.rules.causes import verdict_causes
from gpulane.analysis.store import frame_from_rows
from gpulane.record import Row
from tests.analysis.rules.rule_sets import rule_set
from tests.analysis.rules.synthetic import collectives, host_copies, machine, topology

ALLOW = ["nccl_transport_matches_path"]
WORDS = "GPU{g} runs pid 4242 (cp, 30 %, 2.0 GiB)"


def _read(rows: list[Row], busy: dict[str, str]) -> list[Row]:
    """Rows whose pre-flight read the GPUs (extra.foreign: GPU -> the others on it)."""
    return [dataclasses.replace(r, extra={**(r.extra or {}), "foreign": busy}) for r in rows]


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_a_slow_copy_on_a_busy_gpu_names_the_process(n: int) -> None:
    gpu = f"GPU{n - 1}"
    busy = {gpu: WORDS.format(g=n - 1)}
    slow = host_copies(n, gpu_solo={gpu: 25.0}) + (collectives(n) if n > 1 else [])
    v = evaluate(frame_from_rows(_read(slow, busy)), rule_set(), topology(n), allow_skip=ALLOW)
    copies = [c for c in v.checks if c.rule == "pinned_h2d" and c.status == FAIL]
    assert copies and {c.subject for c in copies} == {gpu}
    assert all(
        f"likely cause: another process used {gpu}: {busy[gpu]}" in c.message for c in copies
    )
    # a quiet GPU's failed copy names no cause it does not have
    quiet = evaluate(frame_from_rows(_read(slow, {})), rule_set(), topology(n), allow_skip=ALLOW)
    assert not any("likely cause" in c.message for c in quiet.checks if c.rule == "pinned_h2d")
    assert verdict_causes(v.checks)[0].startswith(f"another process used {gpu}")
    assert verdict_causes(quiet.checks) == []


@pytest.mark.parametrize("n", [2, 4, 8])
def test_a_slow_collective_names_a_throttled_gpu_of_its_host(n: int) -> None:
    rows = host_copies(n) + collectives(n, busbw={"all_reduce": 100.0})
    findings = [
        {"severity": "warning", "check": "clocks", "subject": "GPU1",
         "title": "GPU1: clocks held down (HW Slowdown)"},
        {"severity": "info", "check": "pcie_link", "subject": "GPU0", "title": "GPU0: fine"},
    ]  # fmt: skip
    v = evaluate(
        frame_from_rows(_read(rows, {})),
        rule_set(),
        topology(n),
        evidence={"doctor": findings},
        allow_skip=ALLOW,
    )
    failed = [c for c in v.checks if c.status == FAIL and "all_reduce" in c.rule]
    assert failed and all(
        "likely cause: doctor: GPU1: clocks held down (HW Slowdown)" in c.message for c in failed
    )
    assert not any("GPU0: fine" in c.message for c in v.checks)


def test_the_healthy_machine_names_nothing() -> None:
    v = evaluate(frame_from_rows(_read(machine(4), {})), rule_set(), topology(4), allow_skip=ALLOW)
    assert not v.failed and verdict_causes(v.checks) == []


def test_the_verdict_line_repeats_the_first_cause() -> None:
    from gpulane.campaigns.accept.output import print_verdict

    busy = {"GPU0": WORDS.format(g=0)}
    rows = _read(host_copies(2, gpu_solo={"GPU0": 25.0}) + collectives(2), busy)
    v = evaluate(frame_from_rows(rows), rule_set(), topology(2), allow_skip=ALLOW)
    said: list[str] = []
    print_verdict(v, "none", said.append)
    (summary,) = [s for s in said if s.startswith("accept: FAIL")]
    assert f"; likely cause: another process used GPU0: {busy['GPU0']}" in summary


def test_a_copy_below_its_baseline_names_the_busy_gpu() -> None:
    """copy_vs_baseline on the all-GPUs-at-once total (subject "all") and per GPU."""
    busy = {"GPU1": WORDS.format(g=1)}
    base = _read(host_copies(2) + collectives(2), {})
    slow = _read(
        host_copies(2, solo=27.0, at_once={"h2d": 20.0, "d2h": 16.0}) + collectives(2), busy
    )
    v = evaluate(
        frame_from_rows(slow), rule_set(), topology(2), frame_from_rows(base), allow_skip=ALLOW
    )
    failed = [c for c in v.checks if c.rule == "copy_vs_baseline" and c.status == FAIL]
    assert failed and all(
        ("GPU0" in c.subject) or "likely cause: another process used GPU1" in c.message
        for c in failed
    ), [(c.subject, c.message) for c in failed]
    assert any("likely cause: another process used GPU1" in c.message for c in failed)
    assert not any("likely cause" in c.message for c in failed if c.subject == "GPU0")


def test_mixed_machines_keep_each_hosts_causes_to_it() -> None:
    """Two hosts: a busy GPU1 on node-a is no cause of node-b's slow lines."""
    from gpulane.analysis.rules import Check
    from gpulane.analysis.rules.causes import name_causes

    checks = [
        Check("no_foreign_work", FAIL, "rows", "node-a:GPU1", "measured while ...: pid 7"),
        Check("pinned_h2d", FAIL, "expected", "node-a:GPU1", "h2d slow"),
        Check("pinned_h2d", FAIL, "expected", "node-b:GPU1", "h2d slow"),
        Check("all_reduce_busbw_nvlink", FAIL, "expected", "node-a", "slow"),
        Check("all_reduce_busbw_nvlink", FAIL, "expected", "node-b", "slow"),
    ]
    name_causes(checks, None, ["node-a", "node-b"])
    named = {c.subject: "likely cause: another process used GPU1" in c.message for c in checks[1:]}
    assert named == {"node-a:GPU1": True, "node-b:GPU1": False, "node-a": True, "node-b": False}
