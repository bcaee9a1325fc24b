"""Who receives what from whom, for sendrecv and alltoall, on real gloo ranks at 2, 3 and 4.

Expectations are written from nccl-tests (src/sendrecv.cu: sendPeer = (rank+1) % nRanks,
recvPeer = (rank-1+nRanks) % nRanks; src/alltoall.cu AlltoAllInitData: block j of a rank's
result is rank j's block at offset rank*partcount), not from gpulane's spec. Each element
a rank sends says who sent it and from where: SENDER * 1000 + index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpulane.collectives.backends.mpi_buffers import ArrayModuleOps
from gpulane.collectives.pattern import expected
from gpulane.collectives.spec import plan_point
from gpulane.collectives.values import value
from gpulane.rank import free_port

ROOT = Path(__file__).resolve().parents[3]
PER_PEER = 8  # int32 elements each rank sends each peer (a multiple of 4: 16-byte shares)


def direction_job(cfg: Any, ctx: Any) -> None:
    """Run by each rank: the backend's own call for each collective, on tagged inputs."""
    import torch

    from gpulane.collectives.backends.torch_dist import TorchBackend

    backend = TorchBackend(ctx, device="cpu", timeout_s=60)
    try:
        got = {}
        for op in ("sendrecv", "alltoall"):
            point = plan_point(
                op, PER_PEER * ctx.world_size * 4, "int32", "none", 0, ctx.world_size
            )
            bufs = backend.allocate(point, in_place=False)
            bufs.send.copy_(torch.arange(point.counts.send, dtype=torch.int32) + 1000 * ctx.rank)
            bufs.recv.fill_(-1)
            backend.launch(point, bufs)
            backend.synchronize()
            got[op] = bufs.recv.tolist()
        got["threads"] = [torch.get_num_threads()]
        (ctx.run_dir / f"recv-{ctx.rank}.json").write_text(json.dumps(got))
    finally:
        backend.close()


def run_ranks(run_dir: Path, n: int) -> list[dict[str, list[int]]]:
    (run_dir / "config.yaml").write_text("{}\n")
    port = free_port()
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OMPI_", "PMI_", "SLURM_")) and k != "OMP_NUM_THREADS"
        },
        "PYTHONPATH": str(ROOT),
        "WORLD_SIZE": str(n),
        "LOCAL_WORLD_SIZE": str(n),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "GPULANE_LAUNCHER": "gpulane",
    }
    job = "tests.collectives.backends.test_direction_gloo:direction_job"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpulane.launch.worker",
                "--job",
                job,
                "--run-dir",
                str(run_dir),
            ],
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(n)
    ]
    outs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * n, outs
    return [json.loads((run_dir / f"recv-{r}.json").read_text()) for r in range(n)]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_sendrecv_and_alltoall_directions(tmp_path: Path, n: int) -> None:
    got = run_ranks(tmp_path, n)
    whole = PER_PEER * n  # sendrecv moves the whole buffer
    for rank in range(n):
        # sendrecv: from the previous rank, all of it
        prev = (rank - 1) % n
        assert got[rank]["sendrecv"] == [1000 * prev + i for i in range(whole)], rank
        # alltoall: block j holds what rank j sent to this rank (its block number `rank`)
        want = [1000 * j + rank * PER_PEER + k for j in range(n) for k in range(PER_PEER)]
        assert got[rank]["alltoall"] == want, rank
        # ranks sharing the host take one intra-op thread each, as torchrun gives them
        assert got[rank]["threads"] == [1], rank


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("op", ["sendrecv", "alltoall"])
def test_the_spec_expects_the_same_directions(op: str, n: int) -> None:
    """The sweep's checks (spec.expected) agree with the directions above, worked by
    moving each rank's input by hand."""
    ops = ArrayModuleOps(np)
    point = plan_point(op, PER_PEER * n * 4, "int32", "none", 0, n)
    c = point.count
    inputs = [value(np.arange(point.counts.send), r, n, "none") for r in range(n)]
    for rank in range(n):
        if op == "sendrecv":
            moved = inputs[(rank - 1) % n]
        else:
            moved = np.concatenate([inputs[j][rank * c : (rank + 1) * c] for j in range(n)])
        idx = np.arange(point.counts.recv)
        assert (expected(ops, point, rank, idx) == moved).all(), rank


def test_cpu_threads_follow_omp_num_threads_else_one_a_shared_host() -> None:
    from gpulane.collectives.backends.torch_common import cpu_threads
    from gpulane.rank import RankContext, RankInfo

    def ctx(local: int) -> RankContext:
        info = RankInfo(0, local * 2, 0, local, None, None, "gpulane")
        return RankContext(info, Path("."), "h")

    cores = os.cpu_count() or 1
    for local in (2, 3, 4, 8):
        assert cpu_threads(ctx(local), {}) == 1
        assert cpu_threads(ctx(local), {"OMP_NUM_THREADS": "6"}) == 6
    assert cpu_threads(ctx(1), {}) == cores  # alone on its host: torch's own default
    assert cpu_threads(ctx(2), {"OMP_NUM_THREADS": "0"}) == 1  # not a count: ignored
    assert cpu_threads(ctx(1), {"OMP_NUM_THREADS": " 3 "}) == 3
