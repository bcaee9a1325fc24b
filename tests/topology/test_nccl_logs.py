"""A run's NCCL lines: the variables that ask NCCL for them, where the files are found
(gpulane's own folder, the user's NCCL_DEBUG_FILE, the rank logs), and what a row keeps."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from gpulane.record import shaping_env
from gpulane.rundir import GPULANE_SET_ENV, NCCL_LOG_DIR, nccl_capture_env, rank_env
from gpulane.topology.nccl_logs import NcclLogs, describe, log_files, read_nccl_files, summary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "public" / "nccl-info"
H20 = FIXTURES / "nccl1189_2node_2xH20_alltoall_cumem_ib_gdrdma_EXCERPTS.txt"


def test_capture_asks_for_init_and_graph_into_the_run(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_SUBSYS", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    env = nccl_capture_env(tmp_path, {"NCCL_P2P_DISABLE": "1"})
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,GRAPH"
    assert env["NCCL_DEBUG_FILE"] == str(tmp_path.resolve() / NCCL_LOG_DIR / "nccl-%h-%p.log")
    assert (tmp_path / NCCL_LOG_DIR).is_dir()  # NCCL writes to stdout when it cannot open it
    ranks = rank_env(tmp_path, {"NCCL_P2P_DISABLE": "1"})
    # The rows keep what the user chose, not what gpulane set for the capture.
    assert shaping_env(ranks) == {"NCCL_P2P_DISABLE": "1"}
    assert rank_env(tmp_path, {"X": "1"}, nccl=False) == {"X": "1"}


def test_a_user_who_set_nccl_debug_keeps_it(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    assert nccl_capture_env(tmp_path, {"NCCL_DEBUG": "WARN"}) == {}
    monkeypatch.setenv("NCCL_DEBUG", "TRACE")
    assert nccl_capture_env(tmp_path, {}) == {}
    # ... and it stays in the rows: the user chose it.
    assert shaping_env({"NCCL_DEBUG": "TRACE"}) == {"NCCL_DEBUG": "TRACE"}


def test_user_subsystems_are_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    env = nccl_capture_env(tmp_path, {"NCCL_DEBUG_SUBSYS": "INIT,NET"})
    assert "NCCL_DEBUG_SUBSYS" not in env
    assert env[GPULANE_SET_ENV] == "NCCL_DEBUG,NCCL_DEBUG_FILE"


def test_reads_the_run_folder_and_again_only_when_it_grew(tmp_path):
    logs = tmp_path / NCCL_LOG_DIR
    logs.mkdir()
    lines = H20.read_text().splitlines()
    (logs / "nccl-H20-GPU-05-1789224.log").write_text(
        "\n".join(x for x in lines if x.startswith("H20-GPU-05")) + "\n"
    )
    watcher = NcclLogs(tmp_path, env={})
    found, note = watcher.for_row("NET")
    assert found is not None and found["transport"] == "P2P/CUMEM"
    assert note == "# transport: P2P/CUMEM (NET)"
    assert watcher.for_row("NET")[1] is None  # said once
    (logs / "nccl-H20-GPU-06-4015539.log").write_text(
        "\n".join(x for x in lines if x.startswith("H20-GPU-06")) + "\n"
    )
    found, note = watcher.for_row("NET")
    assert found["transport"] == "P2P/CUMEM+NET/IB/GDRDMA" and found["channels"] == 8
    assert note == "# transport: P2P/CUMEM+NET/IB/GDRDMA, 8 channels (NET)"
    assert found["source"] == str(logs)


def test_the_users_own_debug_file_of_this_run_only(tmp_path):
    old = tmp_path / "old-host-1.log"
    shutil.copy(H20, old)
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    new = tmp_path / "mine-host-2.log"
    shutil.copy(FIXTURES / "nccl1609_h800_shm_direct_oldfmt_EXCERPT.txt", new)
    env = {"NCCL_DEBUG_FILE": str(tmp_path / "mine-%h-%p.log")}
    files, where = log_files(tmp_path / "run", env, since=time.time())
    assert files == [new] and where == env["NCCL_DEBUG_FILE"]
    env = {"NCCL_DEBUG_FILE": str(tmp_path / "%h-%p.log")}
    files, _ = log_files(tmp_path / "run", env, since=time.time())
    assert old not in files


def test_rank_logs_when_the_lines_went_to_stdout(tmp_path):
    (tmp_path / "logs").mkdir()
    shutil.copy(
        FIXTURES / "nccl952_8xgpu_p2p_ipc_read_net_socket_EXCERPT.txt",
        tmp_path / "logs" / "rank-0.log",
    )
    found = NcclLogs(tmp_path, env={}).summary()
    assert found is not None and found["transport"] == "P2P/IPC+NET/Socket"


def test_nothing_to_read_is_none(tmp_path):
    assert NcclLogs(tmp_path, env={}).for_row("NV18") == (None, None)
    (tmp_path / NCCL_LOG_DIR).mkdir()
    (tmp_path / NCCL_LOG_DIR / "nccl-x-1.log").write_bytes(b"\x00\x01binary")
    assert NcclLogs(tmp_path, env={}).summary() is None


H200_RUNS = FIXTURES.parents[1] / "h200x2" / "doctor" / "runs"
H200_SWEEPS = FIXTURES.parents[1] / "h200x2" / "doctor" / "live"


def _h200_run(preset: str) -> Path:
    (run,) = H200_RUNS.glob(f"*-{preset}-*")
    return run


@pytest.mark.parametrize(
    ("preset", "transport", "via", "channels", "nccl_env"),
    [
        ("nvlink", "P2P/CUMEM", "P2P/CUMEM", 24, None),
        ("pcie-host", "SHM", "SHM/direct/direct", 4, {"NCCL_P2P_DISABLE": "1"}),
        # NCCL logs only the P2P variable under INIT; NCCL_SHM_DISABLE is in the rows' env.
        ("socket", "NET/Socket", "NET/Socket/0", 2, {"NCCL_P2P_DISABLE": "1"}),
    ],
)
def test_the_h200_machines_own_nccl_2_28_9_logs(preset, transport, via, channels, nccl_env):
    """NCCL 2.28.9's INFO files of the three presets on the 2xH200 machine (NV18): the
    transport and channels as the sweep header printed them, from both ranks' files or either."""
    run = _h200_run(preset)
    files, where = log_files(run, env={})
    assert [f.parent.name for f in files] == [NCCL_LOG_DIR, NCCL_LOG_DIR]
    logs = NcclLogs(run, env={})
    found, note = logs.for_row("NV18")
    assert found is not None and where == str(run / NCCL_LOG_DIR)
    header = (H200_SWEEPS / f"sweep-{preset}.txt").read_text().splitlines()
    assert note in header  # '# transport: P2P/CUMEM, 24 channels (NV18)' and the others
    assert note == f"# transport: {transport}, {channels} channels (NV18)"
    assert (found["version"], found["cuda"], found["communicators"]) == ("2.28.9", "13.0", 1)
    assert found["channels"] == channels and found.get("nccl_env") == nccl_env
    # One pair on one host, whatever NCCL used between them: with P2P and SHM off NCCL
    # counts each rank as its own node ("nNodes 2 localRanks 1"), yet it is GPU0-GPU1 of vm.
    pair = {"host": "vm", "a": "GPU0", "b": "GPU1", "transport": transport, "via": [via]}
    assert found["pairs"] == [{**pair, "channels": channels}] and found["net"] == []
    assert found["no_device"] == ["NET/IB: no device found"] and found["network"] == "Socket"
    for one in files:  # each rank's file alone says the same
        alone = summary(read_nccl_files([one]))
        assert describe(alone, "NV18") == note.removeprefix("# transport: ")
        assert alone["pairs"] == found["pairs"]
