"""Outliers among a campaign's pairs of nodes: each pair ran on other hosts, and is still a
peer of the others (the 8-node Slurm accept named no slowed node when hosts kept every pair
apart)."""

from __future__ import annotations

import pytest

from gpulane.analysis.rules.measurement import measurement_key
from gpulane.analysis.rules.model import FAIL
from gpulane.analysis.rules.outliers import outliers
from gpulane.record import Row, row_of


def _row(a: str, b: str, busbw: float) -> Row:
    return row_of({
        "kind": "collective", "op": "all_reduce", "dtype": "float", "redop": "sum",
        "root": -1, "in_place": True, "size_bytes": 1 << 20, "count": 1 << 18,
        "world_size": 2, "nodes": 2, "backend": "torch-gloo", "path": "NET",
        "busbw_gbps": busbw, "extra": {"hosts": [a, b]},
    })  # fmt: skip


@pytest.mark.parametrize("n", [3, 4, 8])
def test_the_slow_nodes_pairs_are_outliers_among_all_pairs(n: int) -> None:
    nodes = [f"c{i}" for i in range(1, n + 1)]
    cells = {}
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            rec = _row(a, b, 0.011 if "c2" in (a, b) else 0.08)
            cells[(measurement_key(rec), f"{a}+{b}")] = [rec]
    checks = outliers("busbw_among_peers", cells, "busbw_gbps", "GB/s", 0.5, True)
    failed = sorted(c.subject for c in checks if c.status == FAIL)
    slow = sorted(f"{a}+{b}" for i, a in enumerate(nodes) for b in nodes[i + 1 :] if "c2" in (a, b))
    assert failed == slow
