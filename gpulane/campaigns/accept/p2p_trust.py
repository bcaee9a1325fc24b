"""Run the P2P trust check: a small all_reduce between the two ranks of each GPU pair,
under a short timeout, once as the machine is and once staged through host memory
(``NCCL_P2P_DISABLE=1``), then judge each pair (``analysis.doctor.p2p_trust``).

Each run is two real processes (``multiprocessing``, spawned) joined by
``torch.distributed`` over a TCP store: NCCL with one GPU each, or gloo on CPUs (the
stand-in where there are no GPUs). A run that does not finish within the timeout after
both ranks started is a hang: its processes are killed and the pair FAILs. On one GPU
there is no pair: the check is not applicable (:data:`NOT_APPLICABLE`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpulane.analysis.doctor.model import Report
from gpulane.analysis.doctor.p2p_trust import (
    ERROR,
    HANG,
    OK,
    PairEvidence,
    PairResult,
    Run,
    findings,
    infer_causes,
    judge_pair,
    pair_evidence,
)
from gpulane.topology.evidence import Evidence, gather_live
from gpulane.topology.evidence.p2p_live import gather_p2p_facts

NOT_APPLICABLE = "not applicable: fewer than two GPUs, no pair to check"
STAGED_ENV = {"NCCL_P2P_DISABLE": "1"}


@dataclass(frozen=True)
class PairJob:
    """What each rank of one run does (picklable: it crosses into spawned processes)."""

    backend: str  # nccl, gloo
    devices: tuple[int, int] | None  # CUDA device per rank; None on CPUs
    size_bytes: int
    iters: int
    warmup: int
    env: tuple[tuple[str, str], ...]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pair_rank(rank: int, port: int, job: PairJob, out: Any) -> None:
    """One rank: time ``iters`` all_reduce calls of ``size_bytes`` after ``warmup``; rank
    0 puts ("time", seconds per op). Puts ("ready", rank) once torch is imported."""
    os.environ.update(dict(job.env))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import torch
    import torch.distributed as dist

    out.put(("ready", rank))
    try:
        device = torch.device("cpu")
        if job.devices is not None:
            device = torch.device("cuda", job.devices[rank])
            torch.cuda.set_device(device)
        dist.init_process_group(
            job.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2
        )
        x = torch.ones(max(1, job.size_bytes // 4), dtype=torch.float32, device=device)
        for _ in range(job.warmup):
            dist.all_reduce(x)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(job.iters):
            dist.all_reduce(x)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = (time.perf_counter() - start) / job.iters
        dist.destroy_process_group()
        if rank == 0:
            out.put(("time", seconds))
    except Exception as err:  # the run's own failure, reported as its outcome
        out.put(("error", f"rank {rank}: {type(err).__name__}: {err}"[:300]))


RankFunction = Callable[[int, int, PairJob, Any], None]


def run_once(
    job: PairJob, timeout_s: float, start_s: float = 120.0, rank_fn: RankFunction = pair_rank
) -> Run:
    """One run of ``job`` on two spawned ranks. ``hang`` when it has not finished
    ``timeout_s`` after both ranks started (they are killed); ``error`` when a rank failed,
    died, or did not start within ``start_s``."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=rank_fn, args=(r, port, job, out), daemon=True) for r in (0, 1)]
    for p in procs:
        p.start()
    try:
        return _collect(procs, out, job, timeout_s, start_s)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(5)


def _collect(procs: list[Any], out: Any, job: PairJob, timeout_s: float, start_s: float) -> Run:
    ready: set[int] = set()
    deadline = time.monotonic() + start_s
    began: float | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            if began is None:
                return Run(ERROR, error=f"ranks did not start within {start_s:g} s")
            waited = time.monotonic() - began
            return Run(HANG, error=f"did not finish within {timeout_s:g} s", waited_s=waited)
        try:
            kind, value = out.get(timeout=min(left, 0.2))
        except queue.Empty:
            dead = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
            if dead:
                return Run(ERROR, error=f"a rank died (exit {dead[0].exitcode})")
            continue
        if kind == "ready":
            ready.add(int(value))
            if len(ready) == 2:
                began = time.monotonic()
                deadline = began + timeout_s
        elif kind == "time":
            took = time.monotonic() - began if began is not None else None
            return Run(OK, float(value), job.size_bytes, waited_s=took)
        else:
            return Run(ERROR, error=str(value))


def check_pairs(
    pairs: Sequence[tuple[str, str]],
    make_job: Callable[[tuple[str, str], dict[str, str]], PairJob],
    evidence: Callable[[str, str], PairEvidence],
    timeout_s: float = 20.0,
    min_ratio: float = 1.0,
    rank_fn: RankFunction = pair_rank,
) -> list[PairResult]:
    """Each pair: the P2P run, then (when it finished) the host-staged run; judged, with
    the causes from ``evidence(a, b)`` for a pair that hung or ran slow."""
    results = []
    for a, b in pairs:
        p2p = run_once(make_job((a, b), {}), timeout_s, rank_fn=rank_fn)
        staged = (
            run_once(make_job((a, b), dict(STAGED_ENV)), timeout_s, rank_fn=rank_fn)
            if p2p.status == OK
            else None
        )
        result = judge_pair(a, b, p2p, staged, timeout_s, min_ratio)
        result.causes = infer_causes(result.outcome, evidence(a, b))
        results.append(result)
    return results


def gpu_job(
    index: dict[str, int], size_bytes: int = 64 << 20, iters: int = 10, warmup: int = 3
) -> Callable[[tuple[str, str], dict[str, str]], PairJob]:
    """Jobs for GPU pairs named as in the topology (``GPU0`` -> CUDA device ``index``)."""

    def make(pair: tuple[str, str], env: dict[str, str]) -> PairJob:
        devices = (index[pair[0]], index[pair[1]])
        return PairJob("nccl", devices, size_bytes, iters, warmup, tuple(sorted(env.items())))

    return make


def wants_p2p_trust(rules_spec: Any) -> dict[str, Any] | None:
    """The first enabled rule of the rule set whose check is ``p2p_trust``, or None."""
    checks = (rules_spec or {}).get("checks") or {}
    for rule in checks.values() if isinstance(checks, dict) else []:
        on = isinstance(rule, dict) and rule.get("enabled", True) not in (False, "false")
        if on and rule.get("check") == "p2p_trust":
            return dict(rule)
    return None


def accept_p2p_trust(rules_spec: Any, gpus: int) -> dict[str, Any] | None:
    """What ``accept`` passes as ``evidence["p2p_trust"]`` when its rule set has a
    ``p2p_trust`` rule: every pair of this machine's GPUs checked (``timeout_s`` and
    ``min_ratio`` from the rule), the causes from live evidence; not applicable on one GPU."""
    rule = wants_p2p_trust(rules_spec)
    if rule is None:
        return None
    if gpus < 2:
        return {"not_applicable": NOT_APPLICABLE}
    results = check_here(
        gather_live(under_load=False),
        gpus,
        timeout_s=float(rule.get("timeout_s") or 20.0),
        min_ratio=float(rule.get("min_ratio") or 1.0),
    )
    return {"pairs": [r.to_dict() for r in results]}


def check_here(
    ev: Evidence, gpus: int, timeout_s: float = 20.0, min_ratio: float = 1.0
) -> list[PairResult]:
    """Every pair of this machine's ``gpus`` GPUs, with NCCL; causes from ``ev`` (the
    doctor's live evidence) and the BAR1, HMM and kernel-log facts read now."""
    facts = gather_p2p_facts()
    names = {f"GPU{i}": i for i in range(gpus)}
    pairs = [(f"GPU{i}", f"GPU{j}") for i in range(gpus) for j in range(i + 1, gpus)]

    def evidence(a: str, b: str) -> PairEvidence:
        return pair_evidence(ev, a, b, facts.bar1, facts.hmm, facts.iommu_log)

    return check_pairs(pairs, gpu_job(names), evidence, timeout_s, min_ratio)


def doctor_p2p_trust(report: Report, ev: Evidence, gpus: int, timeout_s: float = 20.0) -> None:
    """``gpulane doctor --p2p-trust``: the pairs checked here, their failures added to the
    report as findings; on one GPU the check is not run (not applicable), never passed."""
    if gpus < 2:
        report.not_run["p2p_trust"] = NOT_APPLICABLE
        return
    found = findings(check_here(ev, gpus, timeout_s))
    report.findings.extend(found)
    report.ran["p2p_trust"] = f"{len(found)} findings" if found else "ok"
