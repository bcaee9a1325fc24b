"""What `gpulane doctor` reads: ``lspci -vvv`` (ACS, bus ranges), ``nvidia-smi -q``,
``nvidia-smi nvlink -e``, the topology, ``/proc/cmdline`` and the IOMMU groups, loaded
modules and GPUDirect RDMA providers, the kernel log's Xids, NCCL_* settings, and a run
directory's rows and NCCL lines; live from this machine or from captured files.

``acs``, ``iommu``, ``kernel`` and ``nvlink_errors`` are pure parsers (text in, data
out, never an error for odd text); ``gather`` runs the commands, reads the files and
names every source it could not have.
"""

from __future__ import annotations

from gpulane.topology.evidence.gather import (
    DoctorFiles,
    Evidence,
    add_nccl_logs,
    add_run,
    gather_files,
    gather_live,
)

__all__ = ["DoctorFiles", "Evidence", "add_nccl_logs", "add_run", "gather_files", "gather_live"]
