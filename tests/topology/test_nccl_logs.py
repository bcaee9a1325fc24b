"""A run's NCCL lines: the variables that ask NCCL for them, where the files are found
(gpulane's own folder, the user's NCCL_DEBUG_FILE, the rank logs), and what a row keeps."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from gpulane.record import shaping_env
from gpulane.rundir import GPULANE_SET_ENV, NCCL_LOG_DIR, nccl_capture_env, rank_env
from gpulane.topology.nccl_logs import NcclLogs, log_files

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
