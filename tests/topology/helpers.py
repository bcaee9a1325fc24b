"""Fixture text and a few variants derived from it (old drivers, pasted copies)."""

from __future__ import annotations

from tests.conftest import fixture_path

H200 = "h200x2"
TOPO = "public/topo"
LSPCI = "public/lspci"


def text(relative: str) -> str:
    with open(fixture_path(relative), encoding="utf-8", newline="") as fh:
        return fh.read()


# An older driver: SOC instead of SYS, a NIC column named after its device, CPU Affinity
# only (no NUMA columns), no legend lines after the matrix but the old legend.
OLD_SOC = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tmlx4_0\tCPU Affinity
GPU0\t X \tPIX\tSOC\tSOC\tPHB\t0-7,16-23
GPU1\tPIX\t X \tSOC\tSOC\tPHB\t0-7,16-23
GPU2\tSOC\tSOC\t X \tPXB\tSOC\t8-15,24-31
GPU3\tSOC\tSOC\tPXB\t X \tSOC\t8-15,24-31
mlx4_0\tPHB\tPHB\tSOC\tSOC\t X \t

Legend:

  X   = Self
  SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets(e.g. QPI)
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe switches (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing a single PCIe switch
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def tabs_to_spaces(t: str) -> str:
    return t.expandtabs(8)


def to_crlf(t: str) -> str:
    return t.replace("\r\n", "\n").replace("\n", "\r\n")
