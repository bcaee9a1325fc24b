"""`gpulane topo` from captured files, through the real command line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpulane.cli import main as cli_main
from tests import helpers
from tests.conftest import fixture_path

H = "h200x2"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return helpers.gpulane("topo", *args, cwd=Path.cwd(), timeout=120)


def f(name: str) -> str:
    return str(fixture_path(name))


def test_h200x2_json_shape() -> None:
    args = [
        "--topo-file",
        f(f"{H}/topo-m.txt"),
        "--smi-q-file",
        f(f"{H}/nvidia-smi-q.txt"),
        "--nvlink-file",
        f(f"{H}/nvlink-s.txt"),
        "--sysfs-file",
        f(f"{H}/sysfs-pci.txt"),
        "--json",
    ]
    for m in "rwnap":
        args[0:0] = ["--p2p-file", f(f"{H}/topo-p2p-{m}.txt")]
    proc = run(*args)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {"gpus", "nics", "pairs", "warnings"} <= set(data)
    g0 = data["gpus"][0]
    assert {k: g0[k] for k in ("name", "index", "bus_id", "model", "cpu_affinity", "numa")} == {
        "name": "GPU0",
        "index": 0,
        "bus_id": "0000:00:06.0",
        "model": "NVIDIA H200",
        "cpu_affinity": "0-31",
        "numa": 0,
    }
    assert g0["pcie"] == {
        "gen": 5,
        "gen_max": 5,
        "width": 16,
        "width_max": 16,
        "downtrained": False,
    }
    (pair,) = data["pairs"]
    assert {k: pair[k] for k in ("a", "b", "label", "kind", "nvlinks")} == {
        "a": "GPU0",
        "b": "GPU1",
        "label": "NV18",
        "kind": "nvlink",
        "nvlinks": 18,
    }
    assert pair["p2p"] == {
        "read": "OK",
        "write": "OK",
        "nvlink": "OK",
        "atomics": "OK",
        "pcie": "NS",
    }
    assert pair["expected_gbps"] == pytest.approx(478.116)
    assert data["nics"] == [] and data["warnings"] == []


def test_nics_and_soc(tmp_path: Path) -> None:
    from tests.topology.helpers import OLD_SOC

    old = tmp_path / "old.txt"
    old.write_text(OLD_SOC)
    data = json.loads(run("--topo-file", str(old), "--json").stdout)
    assert data["nics"] == [{"name": "NIC0", "device": "mlx4_0", "bus_id": None, "pcie": None}]
    by = {(p["a"], p["b"]): p for p in data["pairs"]}
    assert by[("GPU0", "GPU2")]["label"] == "SYS" and by[("GPU0", "GPU2")]["original"] == "SOC"
    assert by[("GPU0", "GPU2")]["kind"] == "sys"
    assert by[("GPU1", "NIC0")]["label"] == "PHB"
    assert data["gpus"][0]["bus_id"] is None and data["gpus"][0]["pcie"] is None
    assert any("SOC read as SYS" in w for w in data["warnings"])


def test_terminal_view_and_missing() -> None:
    proc = run("--topo-file", f("public/topo/xst_8xA100_NV12_17nics_bond_nic_legend.txt"))
    assert proc.returncode == 0, proc.stderr
    assert "NV12" in proc.stdout and "NIC16" in proc.stdout and "mlx5_bond_0" in proc.stdout
    assert "missing:" in proc.stdout and "PCIe links" in proc.stdout


def test_p2p_mode_prefix() -> None:
    p = f("public/topo/autodl_2x2080ti_p2p_p_NS.txt")
    data = json.loads(
        run(
            "--topo-file",
            f("public/topo/autodl_2x2080ti_pix_gpunumaid.txt"),
            "--p2p-file",
            f"w={p}",
            "--json",
        ).stdout
    )
    assert data["pairs"][0]["label"] == "PIX" and data["pairs"][0]["p2p"] == {"write": "NS"}


def test_lspci_files_told_apart() -> None:
    data = json.loads(
        run(
            "--topo-file",
            f("public/topo/stelline_puget_wrx90_2xRTX6000Ada_phb_2nics.txt"),
            "--lspci-file",
            f("public/lspci/stelline_puget_wrx90_lspci_tv.txt"),
            "--json",
        ).stdout
    )
    assert [g["bus_id"] for g in data["gpus"]] == ["0000:c1:00.0", "0000:c2:00.0"]
    assert [u["bus_id"] for u in data["gpus"][1]["pcie_upstream"]] == ["0000:c0:03.1"]


@pytest.mark.parametrize(
    ("flag", "content", "words"),
    [
        ("--topo-file", "", "empty"),
        ("--topo-file", "\x00\x01\x02ELF", "binary"),
        ("--topo-file", "@lspci", "lspci"),
        ("--topo-file", "\tGPU0\tGPU1\nGPU0\t X \tNV18\n", "truncated"),
        ("--p2p-file", "@topo", "topo -m"),
        ("--smi-q-file", "\xff\xfe garbage", ""),
        ("--lspci-file", "hello world\n", "expected an lspci device line"),
    ],
)
def test_bad_files_one_clear_error(tmp_path: Path, flag: str, content: str, words: str) -> None:
    path = tmp_path / "bad.txt"
    if content == "@lspci":
        path.write_text(
            Path(f("public/lspci/rk3588_rtx3090_lspci_vvvv_8GT_x4_downgraded_tabs.txt")).read_text()
        )
    elif content == "@topo":
        path.write_text(Path(f(f"{H}/topo-m.txt")).read_text())
    elif content.startswith("\xff"):
        path.write_bytes(b"\x80\x81 not text\n")
    else:
        path.write_bytes(content.encode("latin-1"))
    proc = run(flag, str(path))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpulane: error: {path}:")
    assert words in lines[0]
    assert "Traceback" not in proc.stderr


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["topo", "--topo-file", "/nonexistent/topo.txt"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_utf16_windows_capture(tmp_path: Path) -> None:
    p = tmp_path / "topo.txt"
    p.write_bytes(
        Path(f("public/topo/delos_4xV100_mixed_NV2_NV1_SYS_tabs.txt"))
        .read_text()
        .replace("\n", "\r\n")
        .encode("utf-16")
    )
    data = json.loads(run("--topo-file", str(p), "--json").stdout)
    assert {(x["a"], x["b"]): x["label"] for x in data["pairs"]}[("GPU1", "GPU3")] == "NV1"


def _pasted(tmp_path: Path, prompts: bool) -> Path:
    """topo -m followed by topo -p2p r and n, pasted into one file as users do."""
    parts = [text_of(f"{H}/topo-m.txt")]
    for mode in "rn":
        if prompts:
            parts.append(f"$ nvidia-smi topo -p2p {mode}\n")
        parts.append(text_of(f"{H}/topo-p2p-{mode}.txt"))
    path = tmp_path / "pasted.txt"
    path.write_text("$ nvidia-smi topo -m\n" + "\n".join(parts) if prompts else "\n".join(parts))
    return path


def text_of(name: str) -> str:
    return Path(f(name)).read_text()


def test_topo_m_and_p2p_pasted_in_one_file(tmp_path: Path) -> None:
    proc = run("--topo-file", str(_pasted(tmp_path, prompts=True)), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (pair,) = data["pairs"]
    assert pair["label"] == "NV18" and pair["p2p"] == {"read": "OK", "nvlink": "OK"}
    assert data["gpus"][0]["cpu_affinity"] == "0-31"


def test_pasted_p2p_without_its_mode_is_refused(tmp_path: Path) -> None:
    path = _pasted(tmp_path, prompts=False)
    proc = run("--topo-file", str(path), "--json")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"gpulane: error: {path}: line 15: cannot tell which nvidia-smi topo -p2p mode this "
        "matrix is: pass the file as --p2p-file MODE=FILE (MODE r, w, n, a or p), name it "
        "after its mode (topo-p2p-r.txt), or keep the command line (nvidia-smi topo -p2p r) "
        "above each matrix\n"
    )


def test_p2p_file_without_a_mode_is_refused(tmp_path: Path) -> None:
    """Once silently 'mode0', which accept's p2p_ok rule then skipped."""
    path = tmp_path / "p2p.txt"
    path.write_text(text_of(f"{H}/topo-p2p-r.txt"))
    proc = run("--topo-file", f(f"{H}/topo-m.txt"), "--p2p-file", str(path))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"gpulane: error: {path}: line 1: cannot tell which ")
    assert len(proc.stderr.splitlines()) == 1
    ok = run("--topo-file", f(f"{H}/topo-m.txt"), "--p2p-file", f"r={path}", "--json")
    assert json.loads(ok.stdout)["pairs"][0]["p2p"] == {"read": "OK"}


def test_p2p_file_with_several_modes(tmp_path: Path) -> None:
    path = tmp_path / "p2p-all.txt"
    path.write_text("".join(
        f"nvidia-smi topo -p2p {m}\n" + text_of(f"{H}/topo-p2p-{m}.txt") for m in "rwnap"
    ))  # fmt: skip
    data = json.loads(
        run("--topo-file", f(f"{H}/topo-m.txt"), "--p2p-file", str(path), "--json").stdout
    )
    assert data["pairs"][0]["p2p"] == {
        "read": "OK", "write": "OK", "nvlink": "OK", "atomics": "OK", "pcie": "NS",
    }  # fmt: skip


def test_nic_pairs_are_kept() -> None:
    proc = run("--topo-file", f("public/topo/xst_4xA10_sys_nic_legend.txt"), "--json")
    pairs = {(p["a"], p["b"]): p for p in json.loads(proc.stdout)["pairs"]}
    assert pairs[("NIC0", "NIC1")]["label"] == "PIX" and pairs[("NIC0", "NIC1")]["kind"] == "pix"
    assert pairs[("GPU0", "NIC1")]["label"] == "SYS"
    assert len(pairs) == 15  # 6 devices: every pair, NIC-NIC included
