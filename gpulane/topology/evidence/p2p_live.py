"""This machine's BAR1, HMM and kernel-log IOMMU facts, read live for the P2P trust check
(``nvidia-smi -q -d MEMORY``, ``/sys/module/nvidia_uvm/parameters/uvm_disable_hmm``,
``dmesg``); a source that cannot be read (no nvidia-smi, no root for dmesg) stays None."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpulane.topology.evidence.p2p_facts import (
    Bar1,
    Hmm,
    IommuLog,
    parse_bar1,
    parse_hmm,
    parse_iommu_log,
)

TIMEOUT_S = 20


@dataclass
class P2pFacts:
    bar1: list[Bar1] | None = None
    hmm: Hmm | None = None
    iommu_log: IommuLog | None = None


def _output(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 and proc.stdout.strip() else None


def gather_p2p_facts(sys_root: str = "/sys") -> P2pFacts:
    facts = P2pFacts()
    smi = _output(["nvidia-smi", "-q", "-d", "MEMORY"])
    if smi is not None:
        facts.bar1 = parse_bar1(smi)
    param = Path(sys_root) / "module" / "nvidia_uvm" / "parameters" / "uvm_disable_hmm"
    try:
        facts.hmm = parse_hmm(f"uvm_disable_hmm:{param.read_text().strip()}")
    except OSError:
        facts.hmm = None
    log = _output(["dmesg"])
    if log is not None:
        facts.iommu_log = parse_iommu_log(log)
    return facts
