"""The P2P trust runner on real gloo ranks (two spawned processes, torch.distributed over
a TCP store) standing in for a GPU pair: a healthy pair passes; a rank that sleeps past the
timeout makes the pair FAIL with "hang" within the timeout; a pair whose P2P run is slower
than its host-staged run FAILs "slow"; the accept rule reads the results."""

from __future__ import annotations

import time
from typing import Any

from gpulane.analysis.doctor.p2p_trust import HANG, OK, SLOW, PairEvidence
from gpulane.analysis.rules.checks import CHECKS
from gpulane.analysis.rules.evaluate import evaluate
from gpulane.analysis.rules.model import FAIL, PASS, SKIP
from gpulane.analysis.store import frame_from_rows
from gpulane.campaigns.accept.p2p_trust import (
    NOT_APPLICABLE,
    STAGED_ENV,
    PairJob,
    accept_p2p_trust,
    check_pairs,
    doctor_p2p_trust,
    pair_rank,
    run_once,
    wants_p2p_trust,
)
from gpulane.topology.evidence.p2p_facts import Bar1

TIMEOUT = 4.0


def _gloo(pair: tuple[str, str], env: dict[str, str]) -> PairJob:
    return PairJob("gloo", None, 1 << 20, 5, 1, tuple(sorted(env.items())))


def _staged(job: PairJob) -> bool:
    return dict(job.env).get("NCCL_P2P_DISABLE") == "1"


def sleepy_rank(rank: int, port: int, job: PairJob, out: Any) -> None:
    """Rank 1 of the P2P run starts, then sleeps far past the timeout (a deadlocked peer)."""
    if rank == 1 and not _staged(job):
        out.put(("ready", rank))
        time.sleep(120)
        return
    pair_rank(rank, port, job, out)


def slow_rank(rank: int, port: int, job: PairJob, out: Any) -> None:
    """The P2P run's all_reduce takes 20 ms more per call than the staged run's."""
    if not _staged(job):
        import torch.distributed as dist

        real = dist.all_reduce

        def slow(*args: Any, **kwargs: Any) -> Any:
            time.sleep(0.02)
            return real(*args, **kwargs)

        dist.all_reduce = slow
    pair_rank(rank, port, job, out)


def _no_evidence(a: str, b: str) -> PairEvidence:
    return PairEvidence(label="PHB", absent=["lspci -vvv (ACS)"])


def test_a_healthy_gloo_pair_runs_both_ways_and_passes():
    (result,) = check_pairs([("GPU0", "GPU1")], _gloo, _no_evidence, timeout_s=60)
    assert result.outcome in (OK, SLOW), result.detail  # gloo ignores NCCL_P2P_DISABLE
    assert result.compared and result.p2p_gbps and result.staged_gbps
    run = run_once(_gloo(("a", "b"), dict(STAGED_ENV)), 60)
    assert run.status == OK and run.seconds and run.seconds > 0 and run.size_bytes == 1 << 20


def test_a_rank_that_sleeps_past_the_timeout_fails_the_pair_hang_within_the_timeout():
    small_bar = [Bar1("GPU#0", 256, 24564)]

    def evidence(a: str, b: str) -> PairEvidence:
        return PairEvidence(label="PHB", bar1=small_bar)

    (result,) = check_pairs(
        [("GPU0", "GPU1")], _gloo, evidence, timeout_s=TIMEOUT, rank_fn=sleepy_rank
    )
    assert result.outcome == HANG and "hang" in result.detail
    assert [c.name for c in result.causes] == ["bar1"]
    run = run_once(_gloo(("a", "b"), {}), TIMEOUT, rank_fn=sleepy_rank)
    assert run.status == HANG
    assert run.waited_s is not None and TIMEOUT <= run.waited_s < TIMEOUT + 2


def test_a_pair_slower_than_host_staging_fails_slow():
    (result,) = check_pairs(
        [("GPU0", "GPU1")], _gloo, _no_evidence, timeout_s=60, rank_fn=slow_rank
    )
    assert result.outcome == SLOW, result.detail
    assert result.p2p_gbps and result.staged_gbps and result.p2p_gbps < result.staged_gbps
    assert [c.name for c in result.causes] == ["unknown"]


def _verdict(evidence: Any) -> Any:
    rules = {"checks": {"p2p": {"check": "p2p_trust"}}}
    return evaluate(frame_from_rows([]), rules, evidence={"p2p_trust": evidence})


def test_the_accept_rule_fails_a_hung_pair_and_passes_a_healthy_one():
    assert "p2p_trust" in CHECKS
    (hung,) = check_pairs([("GPU0", "GPU1")], _gloo, _no_evidence, TIMEOUT, rank_fn=sleepy_rank)
    pairs = [hung.to_dict()]
    verdict = _verdict({"pairs": pairs})
    assert [c.status for c in verdict.checks] == [FAIL]
    assert "hang" in verdict.checks[0].message and "unknown" in verdict.checks[0].message
    ok = {"a": "GPU0", "b": "GPU1", "outcome": "ok", "detail": "P2P 20 GB/s", "causes": []}
    assert [c.status for c in _verdict({"pairs": [ok]}).checks] == [PASS]


def test_one_gpu_is_not_applicable_never_a_pass():
    verdict = _verdict({"not_applicable": NOT_APPLICABLE})
    assert [c.status for c in verdict.checks] == [SKIP]
    assert verdict.status != "PASS"


def test_accept_runs_the_pairs_only_for_a_p2p_trust_rule_and_one_gpu_is_not_applicable():
    assert accept_p2p_trust({"checks": {"x": {"check": "min", "metric": "busbw"}}}, 8) is None
    off = {"checks": {"p": {"check": "p2p_trust", "enabled": False}}}
    assert accept_p2p_trust(off, 8) is None
    on = {"checks": {"p": {"check": "p2p_trust", "timeout_s": 5}}}
    assert accept_p2p_trust(on, 1) == {"not_applicable": NOT_APPLICABLE}
    assert wants_p2p_trust(on) == {"check": "p2p_trust", "timeout_s": 5}


def test_doctor_p2p_trust_on_one_gpu_is_not_run_and_refuses_files(capsys: Any) -> None:
    from gpulane.analysis.doctor.model import Report
    from gpulane.cli import main as cli
    from gpulane.topology.evidence import Evidence
    from tests.conftest import fixture_path

    report = Report(host="x", live=True)
    doctor_p2p_trust(report, Evidence(host="x", live=True), 1)
    assert report.not_run["p2p_trust"] == NOT_APPLICABLE and "p2p_trust" not in report.ran
    smi = str(fixture_path("h200x2/nvidia-smi-q.txt"))
    assert cli(["doctor", "--smi-q-file", smi, "--p2p-trust"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gpulane: error: --p2p-trust runs collectives on this machine; not with files"]
