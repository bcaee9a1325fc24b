"""`gpulane topo` on a single real capture that names the GPUs (issue 43 part 3, issue 44
item 12): a ``topo -p2p`` matrix alone, or an ``lspci -tv`` tree alone, used to give "no
GPUs in the given files". Each real file, a UTF-16 copy and copies cut at random offsets
go through ``from_files`` and the real command line.

Sources: tests/fixtures/public/SOURCES.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.cli import main as cli_main
from gpulane.errors import GpulaneError
from gpulane.topology.files import CaptureFiles, from_files
from tests.conftest import FIXTURES
from tests.parse_helpers import encoded_copy, random_cut

P2P = FIXTURES / "public" / "topo" / "autodl_2x2080ti_p2p_p_NS.txt"
LSPCI = FIXTURES / "public" / "lspci"
TREES = {
    "stelline_asus_esc8000a_e12_lspci_tv.txt": 4,
    "stelline_puget_wrx90_lspci_tv.txt": 2,
    "l2fwd_nv_lspci_tv_plx_switch_nic_gpu_FRAGMENT.txt": 1,
}
# A GPU function in a tree line, read independently of the parser: its bus number and
# device, then an NVIDIA name that is no audio/USB/serial function.
_TREE_GPU = re.compile(r"(\d\d\.\d)\s+NVIDIA Corporation (?!.*(?:Audio|USB|Serial))")


def test_p2p_matrix_alone_names_the_gpus() -> None:
    topo = from_files(CaptureFiles(p2p_file=[str(P2P)]))
    assert [g.name for g in topo.gpus] == ["GPU0", "GPU1"]
    (pair,) = topo.pairs
    assert (pair.a, pair.b, pair.p2p) == ("GPU0", "GPU1", {"pcie": "NS"})
    assert any("no --topo-file" in m for m in topo.missing)


@pytest.mark.parametrize(("name", "gpus"), sorted(TREES.items()))
def test_lspci_tree_alone_names_the_gpus(name: str, gpus: int) -> None:
    path = LSPCI / name
    printed = _TREE_GPU.findall(path.read_text())
    assert len(printed) == gpus
    topo = from_files(CaptureFiles(lspci_file=[str(path)]))
    assert [g.name for g in topo.gpus] == [f"GPU{i}" for i in range(gpus)]
    bus = [g.bus_id for g in topo.gpus]
    assert bus == sorted(bus) and all(b and b.endswith(".0") for b in bus)
    assert all(g.model and "NVIDIA" in g.model for g in topo.gpus)
    # the bridges above each GPU, from the same tree
    assert all(g.upstream for g in topo.gpus)


def _topo_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    status = cli_main(["topo", *args, "--json"])
    out, err = capsys.readouterr()
    return status, (json.loads(out) if status == 0 else {}), err


def test_cli_p2p_file_alone(capsys: pytest.CaptureFixture[str]) -> None:
    status, data, err = _topo_json(capsys, "--p2p-file", str(P2P))
    assert status == 0, err
    assert [g["name"] for g in data["gpus"]] == ["GPU0", "GPU1"]


def test_cli_lspci_tree_alone(capsys: pytest.CaptureFixture[str]) -> None:
    path = LSPCI / "stelline_asus_esc8000a_e12_lspci_tv.txt"
    status, data, err = _topo_json(capsys, "--lspci-file", str(path))
    assert status == 0, err
    assert [g["bus_id"] for g in data["gpus"]] == [
        "0000:01:00.0",
        "0000:41:00.0",
        "0000:c1:00.0",
        "0000:e1:00.0",
    ]


def _files(path: Path) -> CaptureFiles:
    if path.name == P2P.name:
        return CaptureFiles(p2p_file=[f"p={path}"])
    return CaptureFiles(lspci_file=[str(path)])


@pytest.mark.parametrize("path", [P2P, *(LSPCI / n for n in sorted(TREES))], ids=lambda p: p.name)
def test_utf16_copy_reads_as_the_original(tmp_path: Path, path: Path) -> None:
    copy = encoded_copy(tmp_path, path)
    want = [(g.name, g.bus_id) for g in from_files(_files(path)).gpus]
    assert [(g.name, g.bus_id) for g in from_files(_files(copy)).gpus] == want


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([P2P, LSPCI / "stelline_asus_esc8000a_e12_lspci_tv.txt"]), st.data())
def test_cut_copy_gives_gpus_before_the_cut_or_one_clear_error(
    path: Path, data: st.DataObject
) -> None:
    whole = [(g.name, g.bus_id) for g in from_files(_files(path)).gpus]
    with random_cut(data, path, name=path.name) as (copy, _kept):  # ASCII: bytes are characters
        try:
            gpus = [(g.name, g.bus_id) for g in from_files(_files(copy)).gpus]
        except GpulaneError as err:
            assert str(copy) in str(err) or "no GPUs" in str(err)
            return
    if path == P2P:
        assert gpus == whole  # the matrix header names them all, or the file is refused
    else:
        assert gpus == whole[: len(gpus)]  # the tree's GPUs up to the cut, in bus order
