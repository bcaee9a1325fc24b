"""measure=true takes the topology live, as `gpulane topo --json` does: without a GPU the
probe says what it could not see and the advice says "not probed"; with a topology (a
4-GPU NV18 box, an 8-GPU A100 box from its `nvidia-smi topo -m` capture) placement and
explanations name the real path labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulane.commands.advise import main
from gpulane.planning.inputs import probe_live, write_beside
from gpulane.planning.placement import place
from gpulane.session.world import local_gpus
from gpulane.topology.files import CaptureFiles, from_files
from gpulane.topology.model import Topology
from tests.conftest import fixture_path
from tests.planning.common import box

A100X8 = "public/topo/xst_8xA100_NV12_17nics_bond_nic_legend.txt"


def nv18_box(n: int) -> Topology:
    every = {(a, b) for a in range(n) for b in range(a + 1, n)}
    return box(n, every, 5, 16)


@pytest.mark.skipif(bool(local_gpus()), reason="this machine has GPUs: the probe sees them")
def test_probe_without_a_gpu_says_what_it_could_not_see() -> None:
    topo, source = probe_live()
    assert topo is None
    assert source.startswith("not probed (no GPU)") and "no NVIDIA GPU found" in source


def test_probe_with_gpus_is_written_where_auto_finds_it(tmp_path: Path) -> None:
    topo, source = probe_live(lambda: nv18_box(4))
    assert topo is not None and source.startswith("live probe of this machine (4 GPUs")
    run = tmp_path / "20261127-000000-advise-measured-abcd"
    run.mkdir()
    (written,) = write_beside(topo, [run, tmp_path / "gone"])
    again = Topology.from_json(json.loads(written.read_text()))
    assert {p.label for p in again.pairs} == {"NV18"} and len(again.gpus) == 4


@pytest.mark.skipif(bool(local_gpus()), reason="this machine has GPUs: the probe sees them")
def test_advise_measure_true_without_a_gpu_does_not_claim_a_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows given (so nothing is measured), measure=true, topology=auto and none beside
    the rows: the live probe runs, sees no GPU, and the table says so."""
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "rows.jsonl").write_text(fixture_path("advise/nvlink-rows.jsonl").read_text())
    argv = ["model=llama3-8b", "gpus=2", "gpu=H200", "batch=1", "input_len=512",
            "output_len=16", f"run={rows}", "measure=true", "calibrate=false"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "# topology: not probed (no GPU): no NVIDIA GPU found" in out
    assert "none found beside the rows" not in out
    assert not (rows / "topology.json").exists()  # nothing probed, nothing written


def test_advise_on_a_4_gpu_nv18_topology_names_nv18(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topo_file = tmp_path / "topology.json"
    topo_file.write_text(json.dumps(nv18_box(4).to_json()))
    argv = ["model=llama3-70b", "gpus=4", "batch=4,32", "input_len=512", "output_len=64",
            f"run={fixture_path('advise/nvlink-rows.jsonl')}", f"topology={topo_file}",
            "calibrate=false", "format=json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    by_name = {p["name"]: p for p in doc["predictions"] if p["batch"] == 4}
    assert set(by_name) == {"TP=4", "PP=2xTP=2", "PP=4"}
    assert doc["topology"] == str(topo_file)
    assert by_name["TP=4"]["placement"]["tp_label"] == "NV18"
    assert by_name["PP=2xTP=2"]["placement"]["tp_label"] == "NV18"
    assert by_name["PP=4"]["placement"]["pp_label"] == "NV18"
    reasons = " ".join(line for r in doc["recommendations"] for line in r["reasons"])
    assert "unknown" not in reasons


@pytest.mark.parametrize(("tp", "pp"), [(8, 1), (4, 2), (2, 4), (1, 8)])
def test_8_gpu_a100_capture_places_on_nv12(tp: int, pp: int) -> None:
    topo = from_files(CaptureFiles(topo_file=str(fixture_path(A100X8))))
    assert len(topo.gpus) == 8
    p = place(topo, 8, tp, pp)
    assert sorted(g for grp in p.groups for g in grp) == [f"GPU{i}" for i in range(8)]
    if tp > 1:
        assert p.tp_label == "NV12"
    if pp > 1:
        assert p.pp_label == "NV12"


@pytest.mark.parametrize("gpus", [1, 2, 3])
def test_small_boxes_place_every_gpu(gpus: int) -> None:
    topo = nv18_box(gpus)
    for tp in [t for t in range(1, gpus + 1) if gpus % t == 0]:
        p = place(topo, gpus, tp, gpus // tp)
        assert len(p.groups) == gpus // tp
        assert p.tp_label == ("NV18" if tp > 1 else None)
