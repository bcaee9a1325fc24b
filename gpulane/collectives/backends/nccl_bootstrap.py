"""Bringing NCCL up: loading nccl4py, and getting NCCL's unique id from rank 0 to every
rank over whatever the launcher gave us: the torch.distributed store (local launcher,
torchrun, srun), MPI, or a shared file."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpulane.errors import MissingComponent, RunFailed

KEY = "gpulane/nccl_unique_id"


def import_nccl4py(what: str = "backend=nccl") -> tuple[Any, Any]:
    """nccl4py's core module and its low-level bindings, or one error saying what to install."""
    try:
        import nccl.core as nccl_core
        from nccl.bindings import nccl as bindings
    except ImportError as err:
        raise MissingComponent(
            f"{what} needs nccl4py and a libnccl it can load: `pip install 'gpulane[gpu]'` "
            f"or `pip install 'nccl4py[cu13]'` (or [cu12]) ({err}); backend=torch with "
            "backend.memory=torch keeps working"
        ) from err
    return nccl_core, bindings


def over_store(store: Any, rank: int, make_id: Callable[[], bytes], key: str = KEY) -> bytes:
    """Rank 0 publishes; the others block in store.get until it is there."""
    if rank == 0:
        uid = make_id()
        store.set(key, uid)
        return uid
    return bytes(store.get(key))


def over_mpi(comm: Any, make_id: Callable[[], bytes]) -> bytes:
    uid = make_id() if comm.Get_rank() == 0 else None
    return bytes(comm.bcast(uid, root=0))


def over_file(
    path: Path, rank: int, make_id: Callable[[], bytes], timeout_s: float = 120.0
) -> bytes:
    """For launchers with no channel at all: a file on a filesystem every rank sees."""
    if rank == 0:
        uid = make_id()
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(uid)
        os.replace(tmp, path)  # readers never see half an id
        return uid
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise RunFailed(
                f"rank {rank}: no NCCL unique id appeared at {path} in {timeout_s:.0f} s"
            )
        time.sleep(0.05)
    return path.read_bytes()
