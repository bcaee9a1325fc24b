"""torch.distributed's rendezvous through MPI, for ranks mpirun started without MASTER_ADDR."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulane.collectives.backends.mpi_rendezvous import init_method, needs_mpi_rendezvous
from gpulane.rank import RankInfo
from tests.launch.test_mpirun import MPIRUN

pytestmark = pytest.mark.mpi


def test_mpi_rendezvous_agrees_on_rank_0s_port(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from mpi4py import MPI\n"
        "from gpulane.rank import discover\n"
        "from gpulane.collectives.backends.mpi_rendezvous import init_method\n"
        "url = init_method(discover())\n"
        "open(f'{sys.argv[1]}/url-{MPI.COMM_WORLD.Get_rank()}', 'w').write(str(url))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    p = subprocess.run(
        [*MPIRUN, "-np", "3", sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    urls = [(tmp_path / f"url-{r}").read_text() for r in range(3)]
    assert len(set(urls)) == 1
    assert urls[0].startswith("tcp://127.0.0.1:")


def test_rendezvous_only_when_mpirun_gave_no_master() -> None:
    info = RankInfo(0, 2, 0, 2, None, None, "mpirun")
    assert needs_mpi_rendezvous(info, {})
    assert not needs_mpi_rendezvous(info, {"MASTER_ADDR": "h"})
    assert init_method(RankInfo(0, 2, 0, 2, "h", 1, "mpirun"), {}) is None
    assert init_method(RankInfo(0, 2, 0, 2, None, None, "slurm"), {}) is None
