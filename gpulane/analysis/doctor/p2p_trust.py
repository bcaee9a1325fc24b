"""P2P that can be trusted: a pair of GPUs whose small collective hangs, or whose P2P runs
slower than the same collective staged through host memory (``NCCL_P2P_DISABLE=1``),
fails, and the likely cause is named from the evidence.

Boxes where ``p2pBandwidthLatencyTest`` passes and every NCCL collective deadlocks are
common (NVIDIA/nccl#257: the IOMMU; NVIDIA/nccl#2079: ACS on AMD root-complex bridges;
noonghunna/club-3090#873: BAR1 smaller than VRAM on a patched driver; NVIDIA/
open-gpu-kernel-modules#901: HMM in nvidia_uvm). Two pure functions: :func:`judge_pair`
(two timed runs -> an outcome) and :func:`infer_causes` (an outcome and the evidence ->
causes, most likely first). Nothing here starts a rank: the pairs are run by
``gpulane.campaigns.accept.p2p_trust``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpulane.analysis.doctor.model import Finding
from gpulane.analysis.doctor.p2p import CARRYING
from gpulane.topology.evidence import Evidence
from gpulane.topology.evidence.acs import bridges_between
from gpulane.topology.evidence.p2p_facts import Bar1, Hmm, IommuLog
from gpulane.topology.paths import nvlink_count

OK, HANG, SLOW, ERROR = "ok", "hang", "slow", "error"
TRANSLATED = ("DMA", "DMA-FQ")


@dataclass
class Run:
    """One timed collective between the two ranks of a pair."""

    status: str  # ok, hang, error
    seconds: float | None = None  # per operation, mean over the timed iterations
    size_bytes: int | None = None
    error: str | None = None
    waited_s: float | None = None  # from both ranks started to the verdict

    @property
    def gbps(self) -> float | None:
        if self.status != OK or not self.seconds or not self.size_bytes:
            return None
        return self.size_bytes / self.seconds / 1e9


@dataclass
class PairResult:
    """What the check found for one pair: the outcome, the figures it rests on, why."""

    a: str
    b: str
    outcome: str  # ok, hang, slow, error
    detail: str
    p2p_gbps: float | None = None
    staged_gbps: float | None = None
    compared: bool = False  # False: the host-staged run did not give a figure
    causes: list[Cause] = field(default_factory=list)

    @property
    def subject(self) -> str:
        return f"{self.a}-{self.b}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge_pair(
    a: str, b: str, p2p: Run, staged: Run | None, timeout_s: float, min_ratio: float = 1.0
) -> PairResult:
    """``hang`` when the P2P run did not finish within ``timeout_s``; ``error`` when it
    failed; ``slow`` when its algbw is below ``min_ratio`` x the host-staged run's;
    ``ok`` otherwise (``compared`` False when the staged run gave no figure)."""
    if p2p.status == HANG:
        return PairResult(a, b, HANG, f"hang: the collective did not finish within {timeout_s:g} s")
    if p2p.status != OK or p2p.gbps is None:
        return PairResult(a, b, ERROR, f"error: {p2p.error or 'the collective gave no time'}")
    mine = p2p.gbps
    theirs = staged.gbps if staged is not None else None
    if theirs is None:
        why = staged.error or staged.status if staged is not None else "not run"
        return PairResult(
            a, b, OK, f"finished, {mine:.3g} GB/s; host-staged run gave no figure ({why})", mine
        )
    if mine < min_ratio * theirs:
        detail = (
            f"slow: P2P {mine:.3g} GB/s < {min_ratio:g} x host-staged {theirs:.3g} GB/s "
            f"(NCCL_P2P_DISABLE=1)"
        )
        return PairResult(a, b, SLOW, detail, mine, theirs, True)
    detail = f"P2P {mine:.3g} GB/s >= {min_ratio:g} x host-staged {theirs:.3g} GB/s"
    return PairResult(a, b, OK, detail, mine, theirs, True)


@dataclass
class Cause:
    """A likely cause: its name (acs, iommu, hmm, bar1, driver_p2p, unknown), the exact
    evidence it rests on, and what to do."""

    name: str
    evidence: str
    fix: str


@dataclass
class PairEvidence:
    """What is known about one pair's path; None where the source was not read."""

    label: str | None = None  # NV18, PIX, PHB, ...
    acs_read: bool = False
    acs_redirecting: list[str] = field(default_factory=list)  # "bus: ACSCtl: ..." lines
    iommu: list[str] | None = None  # lines saying it translates; [] when read and passthrough
    hmm: Hmm | None = None
    bar1: list[Bar1] | None = None
    p2p_status: dict[str, str] | None = None  # mode -> OK/NS/CNS/... (topo -p2p)
    absent: list[str] = field(default_factory=list)  # sources not read


FIXES = {
    "acs": "turn ACS off on those bridges (BIOS, `pci=noacs`, or `setpci -s BUS "
    "ECAP_ACS+6.w=0000` per port) so peer requests go across, not up to the root complex",
    "iommu": "boot with `iommu=pt` (or the IOMMU off in the BIOS when no VM needs it)",
    "hmm": "load nvidia_uvm with `uvm_disable_hmm=1` (options nvidia_uvm uvm_disable_hmm=1)",
    "bar1": "enable Above 4G Decoding and Resizable BAR in the BIOS (BAR1 >= VRAM); a "
    "VBIOS without ReBAR caps BAR1 at 256 MiB",
    "driver_p2p": "the driver does not offer P2P for this pair (GNS: the GPU model, CNS: "
    "the chipset, TNS: the topology): run with NCCL_P2P_DISABLE=1, or another driver",
    "unknown": "capture `lspci -vvv` (as root), `dmesg`, `nvidia-smi -q` and `nvidia-smi "
    "topo -p2p r` and run the doctor on them; NCCL_DEBUG=INFO shows where it stops",
}


def _status_causes(ev: PairEvidence, nvlink: bool) -> list[Cause]:
    # The modes that carry the pair's traffic (as the doctor's p2p check reads them).
    modes = CARRYING["nvlink" if nvlink else "pcie"]
    bad = {k: v for k, v in (ev.p2p_status or {}).items() if k in modes and v.upper() != "OK"}
    if not bad:
        return []
    words = ", ".join(f"{k}={v}" for k, v in sorted(bad.items()))
    return [Cause("driver_p2p", f"nvidia-smi topo -p2p: {words}", FIXES["driver_p2p"])]


def _bar1_causes(ev: PairEvidence) -> list[Cause]:
    small = [g for g in ev.bar1 or [] if g.maps_all_memory is False]
    if not small:
        return []
    words = "; ".join(f"{g.bus_id}: BAR1 {g.bar1_mib} MiB < FB {g.fb_mib} MiB" for g in small)
    return [Cause("bar1", words, FIXES["bar1"])]


def infer_causes(outcome: str, ev: PairEvidence) -> list[Cause]:
    """The likely causes of a pair's ``hang`` or ``slow`` outcome, most likely first; none
    for ``ok``. NVLink pairs: only the driver's P2P status applies (their traffic crosses
    neither the PCIe bridges, the IOMMU nor BAR1). HMM is named for hangs only. When no
    evidence points anywhere, one ``unknown`` cause names the sources that were absent."""
    if outcome not in (HANG, SLOW):
        return []
    nvlink = ev.label is not None and nvlink_count(ev.label) is not None
    causes = _status_causes(ev, nvlink)
    if not nvlink:
        if ev.acs_redirecting:
            causes.append(Cause("acs", "; ".join(ev.acs_redirecting[:4]), FIXES["acs"]))
        if ev.iommu:
            causes.append(Cause("iommu", "; ".join(ev.iommu[:4]), FIXES["iommu"]))
        causes += _bar1_causes(ev)
    if outcome == HANG and ev.hmm is not None and ev.hmm.enabled:
        causes.append(Cause("hmm", ev.hmm.line or "HMM enabled", FIXES["hmm"]))
    if not causes:
        absent = f"; not read: {', '.join(ev.absent)}" if ev.absent else ""
        what = "nothing in the evidence points to ACS, the IOMMU, HMM, BAR1 or the P2P status"
        causes.append(Cause("unknown", what + absent, FIXES["unknown"]))
    return causes


def _bus_of(ev: Evidence, gpu: str) -> str | None:
    for g in ev.topology.gpus if ev.topology is not None else []:
        if g.name == gpu:
            return g.bus_id
    return None


def _iommu_lines(ev: Evidence, buses: list[str], log: IommuLog | None) -> list[str] | None:
    if ev.iommu is None and log is None and ev.cmdline is None:
        return None
    lines = []
    for bus in buses:
        kind = ev.iommu.type_of(bus) if ev.iommu is not None else None
        if kind in TRANSLATED:
            lines.append(f"{bus}: iommu_group type {kind}")
    if log is not None and log.mode == "translated" and log.mode_line:
        lines.append(f"dmesg: {log.mode_line}")
    if log is not None and log.fault_count:
        lines.append(f"dmesg: {log.fault_count} IOMMU fault line(s), first: {log.faults[0][:160]}")
    params = ev.cmdline or {}
    on = any(params.get(k) == "on" for k in ("intel_iommu", "amd_iommu"))
    if on and params.get("iommu") != "pt" and params.get("iommu.passthrough") != "1" and not lines:
        lines.append("/proc/cmdline: " + " ".join(f"{k}={v}" for k, v in params.items()))
    return lines


def pair_evidence(
    ev: Evidence,
    a: str,
    b: str,
    bar1: list[Bar1] | None = None,
    hmm: Hmm | None = None,
    iommu_log: IommuLog | None = None,
) -> PairEvidence:
    """The doctor's evidence (lspci ACS, IOMMU groups, cmdline, topology with its P2P
    status) and the further facts (BAR1, HMM, the kernel log's IOMMU) for GPUs ``a``-``b``."""
    pair = next(
        (p for p in (ev.topology.gpu_pairs() if ev.topology else []) if {p.a, p.b} == {a, b}),
        None,
    )
    buses = [x for x in (_bus_of(ev, a), _bus_of(ev, b)) if x]
    out = PairEvidence(
        label=pair.label if pair else None, p2p_status=dict(pair.p2p) or None if pair else None
    )
    if ev.pci is not None:
        out.acs_read = True
        if len(buses) == 2:
            bridges = bridges_between(ev.pci, buses[0], buses[1])
        else:  # a grep of ACSCtl lines: no bus ids, every redirecting port is suspect
            bridges = [f for f in ev.pci if f.redirects()]
        out.acs_redirecting = [
            f"{f.bus_id or '(no device line)'}: {f.acs_line}" for f in bridges if f.redirects()
        ]
    else:
        out.absent.append("lspci -vvv (ACS)")
    out.iommu = _iommu_lines(ev, buses, iommu_log)
    if out.iommu is None:
        out.absent.append("IOMMU (dmesg, iommu_groups, /proc/cmdline)")
    out.hmm = hmm
    if hmm is None or hmm.enabled is None:
        out.absent.append("HMM (uvm_disable_hmm)")
    if bar1 is not None:
        out.bar1 = [g for g in bar1 if not buses or g.bus_id in buses] or bar1
    else:
        out.absent.append("nvidia-smi -q (BAR1)")
    if out.p2p_status is None:
        out.absent.append("nvidia-smi topo -p2p")
    return out


def findings(results: list[PairResult]) -> list[Finding]:
    """One doctor finding (error) per pair that hung or ran slow, with its causes."""
    out = []
    for r in results:
        if r.outcome not in (HANG, SLOW, ERROR):
            continue
        causes = ", ".join(c.name for c in r.causes) or "-"
        evidence = "\n".join([r.detail, *(f"{c.name}: {c.evidence}" for c in r.causes)])
        out.append(
            Finding(
                "error",
                "p2p_trust",
                f"{r.subject}: P2P collective {r.outcome} (likely: {causes})",
                evidence,
                "a pair whose P2P hangs deadlocks every NCCL collective over it; one slower "
                "than host staging costs every tensor-parallel step",
                "; ".join(c.fix for c in r.causes) or FIXES["unknown"],
                r.subject,
            )
        )
    return out
