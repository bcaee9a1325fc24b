"""Rank discovery from the variables each launcher really sets."""

from __future__ import annotations

import pytest

from gpulane.rank import discover, expand_hostlist, first_slurm_host, shared_run_id


def test_no_launcher() -> None:
    assert discover({"HOME": "/root"}) is None


def test_torchrun() -> None:
    info = discover(
        {
            "RANK": "3",
            "WORLD_SIZE": "8",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "n1",
            "MASTER_PORT": "29500",
            "TORCHELASTIC_RUN_ID": "abc",
        }
    )
    assert info is not None
    assert (info.rank, info.world_size, info.local_rank, info.launcher) == (3, 8, 1, "torchrun")
    assert (info.master_addr, info.master_port) == ("n1", 29500)


def test_open_mpi() -> None:
    info = discover(
        {
            "OMPI_COMM_WORLD_RANK": "1",
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        }
    )
    assert info is not None
    assert (info.rank, info.world_size, info.local_rank, info.launcher) == (1, 4, 1, "mpirun")


def test_mpich_pmi() -> None:
    info = discover({"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0"})
    assert info is not None and (info.rank, info.world_size) == (2, 3)


def test_srun_step_but_not_a_batch_script() -> None:
    step = {
        "SLURM_PROCID": "5",
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NUM_TASKS": "8",
        "SLURM_LOCALID": "1",
        "SLURM_NTASKS_PER_NODE": "4",
        "SLURM_JOB_ID": "1234",
        "SLURM_STEP_NODELIST": "vm",
    }
    info = discover(step)
    assert info is not None
    assert (info.rank, info.world_size, info.local_rank, info.launcher) == (5, 8, 1, "slurm")
    assert info.master_port == 20000 + 1234
    # sbatch's script runs once, inside the allocation but in no step
    assert discover({"SLURM_PROCID": "0", "SLURM_JOB_ID": "1234"}) is None


@pytest.mark.parametrize(
    ("env", "run_id"),
    [
        ({"GPULANE_RUN_ID": "mine"}, "mine"),
        ({"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "2"}, "slurm-77.2"),
        ({"TORCHELASTIC_RUN_ID": "xyz"}, "torchrun-xyz"),
        ({"MASTER_ADDR": "n1", "MASTER_PORT": "1"}, "rdzv-n1-1"),
    ],
)
def test_every_rank_derives_the_same_run_id(env: dict[str, str], run_id: str) -> None:
    assert shared_run_id(env) == run_id


def test_hostlists() -> None:
    assert expand_hostlist("gpu[01-03],cpu1") == ["gpu01", "gpu02", "gpu03", "cpu1"]
    assert first_slurm_host("gpu[003-004,010],login1") == "gpu003"
    assert expand_hostlist("") == []


def test_free_port_is_below_the_ephemeral_range_and_free() -> None:
    """The rendezvous port comes from below the kernel's ephemeral range, where no outgoing
    connection takes it as a source port between the probe and rank 0's listen."""
    import socket
    from pathlib import Path

    from gpulane.rank import free_port

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(20000 <= p < low for p in ports), ports
    assert len(ports) > 1  # drawn at random: two launches at once seldom meet
    port = ports.pop()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))  # free indeed
        s.listen()
        # taken: the next probe never returns it while it is held
        assert port not in {free_port() for _ in range(50)}
