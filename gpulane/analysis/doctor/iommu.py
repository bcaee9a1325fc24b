"""The IOMMU: translating DMA for GPUs and NICs (not in passthrough)."""

from __future__ import annotations

from gpulane.analysis.doctor.model import Finding, NotRun
from gpulane.topology.evidence import Evidence

WHY = (
    "with the IOMMU translating DMA, every peer-to-peer and RDMA access is looked up (and, "
    "with ACS, routed through the root complex): GPU P2P and GPUDirect RDMA lose bandwidth, "
    "and NCCL may fall back to host memory or hang"
)
FIX = (
    "boot with the IOMMU in passthrough: add `iommu=pt` to the kernel command line (with "
    "`intel_iommu=on` or `amd_iommu=on` where VFIO needs it), or disable the IOMMU "
    "(VT-d/AMD-Vi) in the BIOS when no VM passthrough is needed"
)
TRANSLATED = ("DMA", "DMA-FQ")


def _in_vm(ev: Evidence) -> str | None:
    if ev.smi is None:
        return None
    for g in ev.smi.gpus:
        mode = g.fields.get("GPU Virtualization Mode/Virtualization Mode", "")
        if mode and mode not in ("None", "N/A"):
            return f"GPU{g.index}: Virtualization Mode: {mode}"
    return None


def check_iommu(ev: Evidence) -> list[Finding]:
    if ev.cmdline is None and ev.iommu is None:
        raise NotRun("neither /proc/cmdline nor the IOMMU groups were read")
    out: list[Finding] = []
    vm = _in_vm(ev)
    if vm:
        out.append(
            Finding(
                "info",
                "iommu",
                "GPUs passed through to a VM: the host's IOMMU and ACS are not visible here",
                vm,
                "the host decides how peer traffic between passed-through GPUs is routed; from "
                "inside the guest neither its IOMMU mode nor its switches' ACS can be read",
                "run gpulane doctor on the host (or ask the provider) for IOMMU and ACS; NCCL's "
                "own transport (gpulane sweep rows, `transport`) shows what P2P it got",
            )
        )
    params = ev.cmdline or {}
    cmd = " ".join(f"{k}={v}" if v else k for k, v in params.items())
    translated: list[str] = []
    if ev.iommu is not None:
        buses = [g.bus_id for g in ev.topology.gpus] if ev.topology else []
        buses += [n.bus_id for n in ev.topology.nics] if ev.topology else []
        buses += [f.bus_id for f in ev.pci or [] if f.bus_id and (f.is_gpu or f.is_nic)]
        seen = set()
        for bus in [b for b in buses if b]:
            kind = ev.iommu.type_of(bus)
            if kind in TRANSLATED and bus not in seen:
                seen.add(bus)
                translated.append(f"{bus}: iommu_group type {kind}")
        if not buses:
            kinds = sorted(set(ev.iommu.types.values()) & set(TRANSLATED))
            if kinds:
                translated.append(
                    f"{sum(1 for t in ev.iommu.types.values() if t in TRANSLATED)} "
                    f"IOMMU groups of type {'/'.join(kinds)}"
                )
    if translated:
        out.append(
            Finding(
                "warning",
                "iommu",
                "the IOMMU translates DMA for GPUs/NICs (not in passthrough)",
                "; ".join(translated[:4]) + (f"; kernel command line: {cmd}" if cmd else ""),
                WHY,
                FIX,
            )
        )
    elif ev.iommu is None and params:
        on = any(params.get(k) == "on" for k in ("intel_iommu", "amd_iommu"))
        passthrough = params.get("iommu") == "pt" or params.get("iommu.passthrough") == "1"
        if on and not passthrough:
            out.append(
                Finding(
                    "warning",
                    "iommu",
                    "IOMMU on without passthrough (kernel command line)",
                    f"/proc/cmdline: {cmd}",
                    WHY,
                    FIX,
                )
            )
    return out
