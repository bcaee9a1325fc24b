"""The doctor says what it could not see: with no NVIDIA driver or GPU the first line says
so and no GPU check claims "nothing found"; nothing checked at all is exit 2; a capture
file of the wrong kind is one error line naming it; NCCL_* a run was asked to set (its
preset, env.*) are the run's choice, a leftover one is still an error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpulane.analysis.doctor import render_text, run_doctor
from gpulane.analysis.doctor.run import HOST_CHECKS
from gpulane.topology.evidence import Evidence
from tests.commands.test_errors import one_error
from tests.conftest import fixture_path
from tests.helpers import gpulane

H200 = fixture_path("h200x2")
CAPTURES = fixture_path("h200x2/doctor/captures")
RUNS = fixture_path("h200x2/doctor/runs")


def _no_gpu_machine(**env: str) -> Evidence:
    """What gather_live finds on a CPU box: no driver, no nvidia-smi, no topology."""
    ev = Evidence(host="vm", live=True)
    ev.missing("driver", "cannot read /proc/driver/nvidia/version: No such file or directory")
    ev.missing("smi", "nvidia-smi not installed")
    ev.missing("nvlink_errors", "nvidia-smi not installed")
    ev.missing("topology", "no GPU seen by NVML")
    ev.missing("lspci", "lspci not installed")
    ev.cmdline, ev.cmdline_text = {}, "BOOT_IMAGE=/vmlinuz root=/dev/vda1"
    ev.got("cmdline", "/proc/cmdline")
    ev.xids = []
    ev.got("kernel_log", "dmesg")
    ev.env = dict(env)
    ev.got("env", "environment")
    return ev


def test_no_gpu_first_line_and_no_gpu_claims() -> None:
    report = run_doctor(_no_gpu_machine())
    lines = render_text(report)
    assert lines[0].startswith(
        "# gpulane doctor: vm (this machine): no NVIDIA driver or GPU found ("
    )
    assert "GPU checks not run" in lines[0]
    assert set(report.ran) <= set(HOST_CHECKS)
    # xid had its source (an empty kernel log) but must not say "no Xid errors"
    assert report.not_run["xid"] == "no NVIDIA GPU or driver on this machine"
    for name in ("p2p", "pcie_link", "ecc", "clocks", "bandwidth", "acs"):
        assert name in report.not_run
    checked = next(ln for ln in lines if ln.startswith("# checked, nothing found"))
    assert "xid" not in checked and "pcie" not in checked
    assert report.exit_status() == 0


def test_no_gpu_host_setting_still_found() -> None:
    report = run_doctor(_no_gpu_machine(NCCL_P2P_DISABLE="1"))
    assert [f.check for f in report.findings] == ["nccl_env"]
    assert report.exit_status() == 1


def test_nothing_checked_is_not_a_pass() -> None:
    ev = Evidence(host="vm", live=True)
    for name in ("driver", "smi", "cmdline", "iommu", "env", "kernel_log", "topology"):
        ev.missing(name, f"{name} unreadable")
    report = run_doctor(ev)
    assert report.ran == {} and report.nothing_checked()
    assert report.exit_status() == 2
    assert "nothing could be checked" in render_text(report)[0]
    assert "# no findings" not in render_text(report)


def test_cli_nothing_checked_exits_2(tmp_path: Path) -> None:
    # A modules list alone: GPUDirect needs an RDMA NIC to judge, so no check runs.
    out = gpulane("doctor", "--modules-file", str(CAPTURES / "modules.txt"), cwd=tmp_path)
    line = one_error(out)
    assert line.startswith("gpulane: error: doctor: nothing could be checked (")
    assert "nothing could be checked" in out.stdout.splitlines()[0]


@pytest.mark.skipif(Path("/proc/driver/nvidia/version").exists(), reason="a machine with a GPU")
def test_cli_live_on_this_cpu_machine(tmp_path: Path) -> None:
    out = gpulane("doctor", "--no-load", "--json", cwd=tmp_path)
    report = json.loads(out.stdout)
    assert report["no_gpu"].startswith("no NVIDIA driver or GPU found")
    assert set(report["checks_run"]) <= set(HOST_CHECKS)
    text = gpulane("doctor", "--no-load", cwd=tmp_path)
    assert "no NVIDIA driver or GPU found" in text.stdout.splitlines()[0]


@pytest.mark.parametrize(
    ("option", "path", "looks"),
    [
        ("--lspci-file", H200 / "topo-m.txt", "nvidia-smi topo -m output, not lspci -vvv output"),
        ("--topo-file", H200 / "nvidia-smi-q.txt", "nvidia-smi -q output, not nvidia-smi topo -m output"),
        ("--smi-q-file", H200 / "topo-m.txt", "nvidia-smi topo -m output, not nvidia-smi -q output"),
        ("--p2p-file", H200 / "topo-m.txt", "nvidia-smi topo -m output, not nvidia-smi topo -p2p output"),
        ("--topo-file", H200 / "topo-p2p-r.txt", "nvidia-smi topo -p2p output, not nvidia-smi topo -m output"),
        ("--nvlink-e-file", H200 / "topo-m.txt", "nvidia-smi topo -m output, not nvidia-smi nvlink -e output"),
        ("--dmesg-file", H200 / "nvidia-smi-q.txt", "nvidia-smi -q output, not `dmesg`"),
        ("--env-file", H200 / "nccl-tests-all_reduce.txt", "nccl-tests output, not KEY=VALUE lines"),
        ("--lspci-file", H200 / "nccl-tests-all_reduce.txt", "nccl-tests output, not lspci -vvv output"),
    ],
)  # fmt: skip
def test_a_capture_of_the_wrong_kind_is_one_line(
    tmp_path: Path, option: str, path: Path, looks: str
) -> None:
    out = gpulane("doctor", option, str(path), cwd=tmp_path)
    line = one_error(out)
    assert line.startswith(f"gpulane: error: {option} {path}: this looks like {looks}")
    assert out.stdout == ""


def test_p2p_file_with_its_mode_and_the_right_captures_pass(tmp_path: Path) -> None:
    out = gpulane(
        "doctor", "--p2p-file", f"r={H200 / 'topo-p2p-r.txt'}", "--topo-file",
        str(CAPTURES / "topo-m.txt"), "--smi-q-file", str(CAPTURES / "nvidia-smi-q.txt"),
        "--nvlink-e-file", str(CAPTURES / "nvidia-smi-nvlink-e.txt"), cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr
    assert "gpulane: error" not in out.stderr


def _pcie_run(tmp_path: Path, asked: bool) -> Path:
    (src,) = RUNS.glob("*-pcie-host-*")
    run = tmp_path / "runs" / src.name
    shutil.copytree(src, run)
    if not asked:  # the same rows and env, but the run was not asked for the variable
        text = (run / "config.yaml").read_text()
        text = text.replace(
            "  name: pcie-host\n  env:\n    NCCL_P2P_DISABLE: '1'\n", "  name: none\n  env: {}\n"
        )
        assert "NCCL_P2P_DISABLE" not in text
        (run / "config.yaml").write_text(text)
    return run


@pytest.mark.parametrize("asked", [True, False], ids=["preset", "leftover"])
def test_run_env_asked_for_or_left_over(tmp_path: Path, asked: bool) -> None:
    run = _pcie_run(tmp_path, asked)
    out = gpulane("doctor", "--json", "--topo-file", str(CAPTURES / "topo-m.txt"), "--run",
                  str(run), cwd=tmp_path)  # fmt: skip
    report = json.loads(out.stdout)
    env = [f for f in report["findings"] if f["subject"] == "NCCL_P2P_DISABLE"]
    transport = [f for f in report["findings"] if f["check"] == "transport"]
    assert len(env) == 1 and len(transport) == 1
    if asked:
        assert out.returncode == 0, out.stdout
        assert env[0]["severity"] == "info"
        assert (
            env[0]["title"]
            == f"NCCL_P2P_DISABLE=1 was the run's choice (run {run.name}'s preset=pcie-host)"
        )
        assert transport[0]["severity"] == "info"
        assert "as the run asked" in transport[0]["title"]
    else:
        assert out.returncode == 1
        assert env[0]["severity"] == "error"
        assert env[0]["title"] == "NCCL_P2P_DISABLE=1 switches a path off"
        assert transport[0]["severity"] == "error"


def test_env_dot_variable_is_the_runs_choice(tmp_path: Path) -> None:
    run = _pcie_run(tmp_path, asked=False)
    text = (
        (run / "config.yaml").read_text().replace("env: {}\n", "env:\n  NCCL_P2P_DISABLE: '1'\n", 1)
    )
    (run / "config.yaml").write_text(text)
    out = gpulane("doctor", "--json", "--topo-file", str(CAPTURES / "topo-m.txt"), "--run",
                  str(run), cwd=tmp_path)  # fmt: skip
    report = json.loads(out.stdout)
    (env,) = [f for f in report["findings"] if f["subject"] == "NCCL_P2P_DISABLE"]
    assert env["severity"] == "info" and env["title"].endswith(
        f"(run {run.name}'s env.NCCL_P2P_DISABLE)"
    )
    assert out.returncode == 0
