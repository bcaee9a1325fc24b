"""torch.distributed rendezvous through MPI, for ranks that mpirun started without MASTER_ADDR.

mpirun says which rank a process is (``OMPI_COMM_WORLD_*`` / ``PMI_*``) but not where
rank 0 listens. Here rank 0 picks a free port and broadcasts its address with mpi4py;
when every rank is on one host the address is 127.0.0.1, else rank 0's host name.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from gpulane.errors import MissingComponent
from gpulane.rank import RankInfo, free_port


def needs_mpi_rendezvous(info: RankInfo, env: Mapping[str, str] | None = None) -> bool:
    """Ranks from mpirun with no MASTER_ADDR of their own."""
    env = os.environ if env is None else env
    return info.launcher == "mpirun" and not (info.master_addr or env.get("MASTER_ADDR"))


def mpi_master(comm: object | None = None) -> tuple[str, int]:
    """(address, port) of rank 0's TCP store, agreed by all ranks of ``comm`` (COMM_WORLD)."""
    if comm is None:
        try:
            from mpi4py import MPI
        except (ImportError, RuntimeError) as err:
            raise MissingComponent(
                "ranks started by mpirun without MASTER_ADDR need mpi4py to find rank 0 "
                f"({err}): pip install mpi4py, or export MASTER_ADDR and MASTER_PORT to the "
                "ranks (mpirun -x MASTER_ADDR -x MASTER_PORT)"
            ) from err
        comm = MPI.COMM_WORLD
    host = socket.gethostname()
    hosts = comm.allgather(host)  # type: ignore[attr-defined]
    if comm.Get_rank() == 0:  # type: ignore[attr-defined]
        one_host = len(set(hosts)) == 1
        addr = "127.0.0.1" if one_host else socket.getfqdn(host)
        port = free_port("127.0.0.1" if one_host else "")
        agreed = (addr, port)
    else:
        agreed = None
    addr, port = comm.bcast(agreed, root=0)  # type: ignore[attr-defined]
    return str(addr), int(port)


def init_method(info: RankInfo, env: Mapping[str, str] | None = None) -> str | None:
    """``tcp://ADDR:PORT`` agreed over MPI when mpirun started the ranks without MASTER_ADDR.

    None otherwise (MASTER_ADDR, torchrun, srun and the local launcher say it already).
    Every rank must call it, as it is collective.
    """
    if not needs_mpi_rendezvous(info, env):
        return None
    addr, port = mpi_master()
    return f"tcp://{addr}:{port}"
