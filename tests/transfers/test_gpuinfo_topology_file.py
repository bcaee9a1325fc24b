"""The copy step reads the topology accept's topo step probed ($GPULANE_TOPOLOGY_FILE)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpulane.transfers import gpuinfo

RECORDED = Path(__file__).parents[2] / "benchmarks/accept/h200x4/healthy/topology.json"


def test_the_probed_topology_is_read_not_probed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "topology.json"
    shutil.copy(RECORDED, path)
    monkeypatch.setenv(gpuinfo.TOPOLOGY_ENV, str(path))
    topo, data = gpuinfo.probe_topology()
    assert topo is not None and data == json.loads(RECORDED.read_text())
    # the 4x H200 of the record, not this (GPU-less) machine
    assert [g.name for g in topo.gpus] == ["GPU0", "GPU1", "GPU2", "GPU3"]


def test_an_unreadable_file_falls_back_to_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(gpuinfo.TOPOLOGY_ENV, raising=False)
    live, _ = gpuinfo.probe_topology()
    for given in ("{not json", '{"gpus": 3}', None):
        path = tmp_path / "topology.json"
        path.unlink(missing_ok=True)
        if given is not None:
            path.write_text(given)
        monkeypatch.setenv(gpuinfo.TOPOLOGY_ENV, str(path))
        topo, _ = gpuinfo.probe_topology()
        # this machine, probed as without the file
        assert (topo is None) == (live is None)
        if topo is not None and live is not None:
            assert [g.bus_id for g in topo.gpus] == [g.bus_id for g in live.gpus]
