"""`gpulane topo`'s path matrix on a wide machine (issue 44 item 12): 8 A100 and 17 NICs
cut every name to "GP…" in one 25-column matrix. A real capture
(tests/fixtures/public/topo/, cited in its SOURCES.md) rendered at terminal widths."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from gpulane.topology.files import CaptureFiles, from_files
from gpulane.topology.render import render

TOPO = Path(__file__).resolve().parents[1] / "fixtures" / "public" / "topo"


def shown(name: str, width: int) -> str:
    out = io.StringIO()
    topo = from_files(CaptureFiles(topo_file=str(TOPO / name)))
    render(topo, Console(file=out, width=width, force_terminal=False, color_system=None))
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 120, 160])
def test_wide_matrix_keeps_every_name_whole(width: int) -> None:
    text = shown("xst_8xA100_NV12_17nics_bond_nic_legend.txt", width)
    paths = text.split("GPUs")[0]  # the path tables, above the GPU table
    assert "…" not in paths
    header = next(line for line in paths.splitlines() if "GPU0" in line)
    assert [f"GPU{i}" in header for i in range(8)] == [True] * 8
    assert "NIC16" in paths and "NV12" in paths
    assert "NIC-NIC paths are left out here" in " ".join(text.split())  # wrapped at 80


def test_narrow_machine_keeps_one_matrix() -> None:
    text = shown("xst_2x1080ti_phb_numa_na.txt", 120)
    assert "Paths (as nvidia-smi topo -m labels them)" in " ".join(text.split())
    assert "left out" not in text and "…" not in text.split("GPUs")[0]
