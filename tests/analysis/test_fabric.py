"""The fabric picture: the node x node matrix, fabric.json, the heatmap and its section."""

from __future__ import annotations

import re
from pathlib import Path

from gpulane.analysis.fabric import (
    Fabric,
    PairCell,
    fabric_section,
    find_fabrics,
    heatmap,
    read_fabric,
    write_fabric,
)

NODES = ["c1", "c2", "c3", "c4"]


def four_nodes() -> Fabric:
    """c3 slow (its pairs outliers), c4 lost (one pair failed, one skipped)."""
    return Fabric(
        nodes=NODES,
        pairs=[
            PairCell("c1", "c2", 0.11, job_id="7"),
            PairCell("c1", "c3", 0.011, job_id="8", outlier="0.011 GB/s is 90% below"),
            PairCell("c2", "c3", 0.012, job_id="9", outlier="0.012 GB/s is 89% below"),
            PairCell("c1", "c4", None, "NODE_FAIL", "10", failure="lost a node (NODE_FAIL)"),
            PairCell("c2", "c4", None, "SKIPPED", failure="node c4 lost"),
            PairCell("c3", "c4", 0.010, job_id="11"),
        ],
        size_bytes=1 << 20,
        outlier_fraction=0.5,
        suspects={"c3": 2},
        lost={"c4": "down* (Not responding)"},
    )


def test_matrix_is_symmetric_with_gaps() -> None:
    m = four_nodes().matrix()
    assert m[0][1] == m[1][0] == 0.11 and m[2][0] == m[0][2] == 0.011
    assert m[0][0] is None and m[0][3] is None and m[3][1] is None
    assert four_nodes().median() == 0.0115  # of the four figures


def test_fabric_json_round_trip_and_picture(tmp_path: Path) -> None:
    path = write_fabric(tmp_path, four_nodes())
    assert find_fabrics(tmp_path) == [path] and find_fabrics(tmp_path / "nothing") == []
    back = read_fabric(path)
    assert back == four_nodes()
    svg = (tmp_path / "fabric.svg").read_text()
    # Two outlier pairs, each outlined in both halves of the matrix: four red rectangles.
    assert len(re.findall(r"stroke: ?#ff0000", svg)) == 4
    png = heatmap(back, "png")
    assert png.startswith(b"\x89PNG")


def test_fabric_section(tmp_path: Path) -> None:
    assert fabric_section(tmp_path) is None
    (tmp_path / "group").mkdir()
    write_fabric(tmp_path / "group", four_nodes(), picture=False)
    html = fabric_section(tmp_path)
    assert html is not None and html.count("<svg") == 1 and "<?xml" not in html
    assert "4 nodes, 6 pairs" in html and "median 0.0115 GB/s" in html
    assert "c1+c3: 0.011 GB/s is 90% below" in html
    assert "node c3: all 2 of its pairs are slow or failed" in html
    assert "node c4 lost: down* (Not responding)" in html
