"""The doctor's CHECKS table: one row per check, grouped by family (one module each).

Adding a check is one row here plus its function ``(evidence) -> [Finding]``; a check
that cannot judge from the evidence raises :class:`NotRun` with the reason, and one whose
sources are all absent is not run, naming them.
"""

from __future__ import annotations

from gpulane.analysis.doctor import bandwidth, gpus, iommu, nccl, p2p, pcie, placement
from gpulane.analysis.doctor.model import DoctorCheck

CHECKS: dict[str, DoctorCheck] = {
    "acs": DoctorCheck(
        pcie.check_acs,
        "pcie",
        ("lspci",),
        "ACS control (ReqRedir/CmpltRedir...) on the bridges between GPUs and NICs (lspci -vvv)",
    ),
    "iommu": DoctorCheck(
        iommu.check_iommu,
        "iommu",
        ("iommu", "cmdline"),
        "the IOMMU translating DMA for GPUs/NICs (iommu_groups type, /proc/cmdline)",
    ),
    "p2p": DoctorCheck(
        p2p.check_p2p, "p2p", ("topology",), "P2P status per GPU pair (nvidia-smi topo -p2p, NVML)"
    ),
    "transport": DoctorCheck(
        nccl.check_transport,
        "nccl",
        ("rows", "nccl"),
        "the transport NCCL used against the path (its INFO lines; nccl_transport_matches_path)",
    ),
    "pcie_link": DoctorCheck(
        pcie.check_links,
        "pcie",
        ("topology",),
        "PCIe links below their maximum generation or width (under load when live)",
    ),
    "pcie_replays": DoctorCheck(
        pcie.check_replays, "pcie", ("smi",), "PCIe replays since reset (nvidia-smi -q)"
    ),
    "nvlink_errors": DoctorCheck(
        gpus.check_nvlink_errors,
        "gpu",
        ("nvlink_errors",),
        "NVLink replay/recovery/CRC error counters (nvidia-smi nvlink -e)",
    ),
    "xid": DoctorCheck(
        gpus.check_xids,
        "gpu",
        ("kernel_log",),
        "Xid errors in the kernel log (dmesg, journalctl -k)",
    ),
    "ecc": DoctorCheck(
        gpus.check_ecc,
        "gpu",
        ("smi",),
        "uncorrectable ECC errors, pending or failed row remapping, recovery action (nvidia-smi -q)",
    ),
    "clocks": DoctorCheck(
        gpus.check_clocks,
        "gpu",
        ("smi", "nvml"),
        "clock event (throttle) reasons and a lowered power limit (nvidia-smi -q, NVML)",
    ),
    "foreign": DoctorCheck(
        gpus.check_foreign,
        "gpu",
        ("smi", "nvml", "rows"),
        "other processes on the GPUs: pid, name, memory, SM utilization (NVML)",
    ),
    "mig": DoctorCheck(
        gpus.check_mig,
        "gpu",
        ("nvml",),
        "GPUs in MIG mode, and the figures a MIG slice cannot measure (NVML)",
    ),
    "persistence": DoctorCheck(
        gpus.check_persistence, "gpu", ("smi",), "persistence mode (nvidia-smi -q)"
    ),
    "nccl_env": DoctorCheck(
        nccl.check_env,
        "nccl",
        ("env", "rows"),
        "NCCL_* variables that switch paths off (environment, nccl.conf, the run's rows)",
    ),
    "gdr": DoctorCheck(
        nccl.check_gdr,
        "nccl",
        ("modules",),
        "GPUDirect RDMA: nvidia_peermem / DMA-BUF when RDMA NICs are present",
    ),
    "numa": DoctorCheck(
        placement.check_numa,
        "placement",
        ("preflight",),
        "ranks' CPUs against their GPU's NUMA node (preflight.json of a run)",
    ),
    "nic_numa": DoctorCheck(
        placement.check_nic_numa,
        "placement",
        ("topology",),
        "each GPU's nearest NIC (topo -m GPU-NIC labels)",
    ),
    "bandwidth": DoctorCheck(
        bandwidth.check_bandwidth,
        "bandwidth",
        ("rows",),
        "measured busbw/copy bandwidth against the path's line rate (a run's rows)",
    ),
}
