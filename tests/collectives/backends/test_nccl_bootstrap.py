"""NCCL unique-id exchange with real processes: over a torch TCPStore, MPI and a file.

The id is 128 random bytes here (NCCL's ncclUniqueId is 128 bytes); what is tested is
that every rank ends up with rank 0's bytes, through the real channel.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from gpulane.rank import free_port

STORE_RANK = textwrap.dedent(
    """
    import os, sys
    from datetime import timedelta
    from torch.distributed import TCPStore
    from gpulane.collectives.backends.nccl_bootstrap import over_store
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    store = TCPStore("127.0.0.1", port, 3, rank == 0, timeout=timedelta(seconds=60))
    uid = over_store(store, rank, lambda: os.urandom(128))
    print(uid.hex())
    """
)

# Each rank writes its id to a file: mpirun may merge the ranks' printed lines.
MPI_RANK = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from mpi4py import MPI
    from gpulane.collectives.backends.nccl_bootstrap import over_mpi
    uid = over_mpi(MPI.COMM_WORLD, lambda: os.urandom(128)).hex()
    Path(sys.argv[1], str(MPI.COMM_WORLD.Get_rank())).write_text(uid)
    """
)

FILE_RANK = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from gpulane.collectives.backends.nccl_bootstrap import over_file
    print(over_file(Path(sys.argv[2]), int(sys.argv[1]), lambda: os.urandom(128), 30).hex())
    """
)


def _all_same(outputs: list[str], n: int) -> None:
    ids = [o.strip().splitlines()[-1] for o in outputs]
    assert len(ids) == n
    assert len(set(ids)) == 1
    assert len(bytes.fromhex(ids[0])) == 128


def test_over_torch_store() -> None:
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STORE_RANK, str(r), port], stdout=subprocess.PIPE, text=True
        )
        for r in (1, 2, 0)  # rank 0 last: the others must wait for it
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    _all_same(outs, 3)


def test_over_mpi(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "3",
            sys.executable,
            "-c",
            MPI_RANK,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    _all_same([(tmp_path / str(r)).read_text() for r in range(3)], 3)


def test_over_file(tmp_path: Path) -> None:
    path = tmp_path / "uid"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", FILE_RANK, str(r), str(path)], stdout=subprocess.PIPE, text=True
        )
        for r in (1, 0)
    ]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    _all_same(outs, 2)
