"""`gpulane doctor`: why is this path slow? Ranked findings from evidence (live or captured):
ACS, IOMMU, P2P status, NCCL's transport, PCIe links and replays, NVLink and Xid errors,
ECC, clocks, persistence, NCCL_* variables, GPUDirect RDMA, NUMA placement, measured
bandwidth against the line rate. Each finding has a severity, the exact evidence, why it
costs bandwidth and the fix. ``checks`` holds the CHECKS table, one module per family.
"""

from __future__ import annotations

from gpulane.analysis.doctor.checks import CHECKS
from gpulane.analysis.doctor.model import SEVERITIES, DoctorCheck, Finding, NotRun, Report
from gpulane.analysis.doctor.render import render_text
from gpulane.analysis.doctor.run import run_doctor

__all__ = [
    "CHECKS",
    "SEVERITIES",
    "DoctorCheck",
    "Finding",
    "NotRun",
    "Report",
    "render_text",
    "run_doctor",
]
