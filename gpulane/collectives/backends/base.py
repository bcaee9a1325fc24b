"""The one interface every per-rank backend (torch.distributed, NCCL, MPI) implements.

A backend allocates buffers, launches one collective, and times a loop of them; the
shared harness (:mod:`gpulane.collectives.harness`) does everything else: warm-up,
checks, statistics and result rows.

Each backend declares two tables, read without starting it: ``calls``, from a collective's
name (:data:`gpulane.collectives.spec.COLLECTIVES`) to the small function that issues
it, and ``cannot``, the (collective, in place) pairs it cannot run, with why.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from gpulane.collectives.spec import Point
from gpulane.collectives.values import Array, ArrayOps
from gpulane.rundir import CONFIG_FILE

SEND = "send"
RECV = "recv"


class Control(Protocol):
    """A side channel between ranks for results and agreement (not what is measured)."""

    def gather(self, obj: Any) -> list[Any] | None: ...  # list on rank 0, None elsewhere
    def broadcast(self, obj: Any) -> Any: ...  # rank 0's object on every rank
    def barrier(self) -> None: ...


@dataclass
class Buffers:
    send: Array  # the send region (a view into `storage` when in place)
    recv: Array  # the receive region
    storage: list[Array]  # what was allocated


def backend_options(run_dir: Path) -> dict[str, Any]:
    """backend.* and the run's ranks from the run directory's saved configuration (what
    a rank started by any launcher can read)."""
    from omegaconf import OmegaConf

    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return {}
    data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(data, dict):
        return {}
    opts = dict(data.get("backend") or {})
    opts["_ranks"] = data.get("ranks")
    return opts


def cannot_run(ops: Iterable[str], in_place: bool | None, why: str) -> dict[tuple[str, bool], str]:
    """Entries of a backend's ``cannot`` table: ``ops`` in one placement (None: both);
    ``{op}`` in ``why`` becomes the collective's name."""
    places = (True, False) if in_place is None else (in_place,)
    return {(op, p): why.format(op=op) for op in ops for p in places}


class Backend(ABC):
    name: str  # result rows' `backend`, e.g. torch-nccl
    # collective name -> the function that issues it (its arguments are the backend's own)
    calls: ClassVar[Mapping[str, Callable[..., Any]]]
    # (collective, in place) -> why this backend cannot run it
    cannot: ClassVar[Mapping[tuple[str, bool], str]] = {}
    ops: ArrayOps
    control: Control
    rank: int
    world_size: int
    on_device: bool  # buffers in GPU memory, timed with device events
    arenas: Any = None  # blocks for the whole run, set by reserve() (nccl_memory.NcclArenas)

    @abstractmethod
    def empty(self, n: int, dtype: str) -> Array:
        """An uninitialised array of n elements of the nccl-tests dtype name."""

    @abstractmethod
    def launch(self, point: Point, bufs: Buffers) -> None:
        """Issue one collective (asynchronously where the backend allows)."""

    def prepare(self, point: Point, bufs: Buffers) -> Callable[[], None]:
        """A call that issues one collective; backends resolve what they can up front,
        so that the timed loop pays only for the launch itself."""
        return lambda: self.launch(point, bufs)

    @abstractmethod
    def time_loop(self, fn: Callable[[], None], iters: int) -> list[float]:
        """Seconds taken by each of ``iters`` calls of fn (device time where there is one)."""

    def time_mean(self, fn: Callable[[], None], iters: int) -> float:
        """Mean seconds per call over ``iters`` back-to-back calls with nothing in between,
        as nccl-tests times them (per-call timing adds a little cost per call)."""
        return sum(self.time_loop(fn, iters)) / iters

    def time_graph(self, fn: Callable[[], None], iters: int, launches: int) -> list[float]:
        """Seconds per call of fn when ``iters`` calls are captured once and replayed."""
        raise NotImplementedError(f"{self.name} has no graph mode")

    @classmethod
    def placement_problem(cls, op: str, in_place: bool, name: str | None = None) -> str | None:
        """Why this backend cannot run ``op`` in this placement, from its tables alone (what
        the front checks before any rank starts); None when it can."""
        why = cls.cannot.get((op, in_place))
        if why is None and op not in cls.calls:
            why = f"{name or cls.__name__} has no call for {op}"
        return why

    @classmethod
    def input_problem(cls, op: str, dtype: str, redop: str, host_buffers: bool) -> str | None:
        """Why this backend cannot run ``op`` on ``dtype`` with ``redop`` (``host_buffers``:
        the ranks will hold host memory), where that is known without starting it."""
        return None

    def supports(self, point: Point, in_place: bool) -> str | None:
        """None when the backend can run this point, else the reason it cannot."""
        return self.placement_problem(point.op, in_place, getattr(self, "name", None))

    def synchronize(self) -> None:  # noqa: B027 - host backends have nothing to wait for
        """Wait until everything issued has finished."""

    def versions(self) -> dict[str, str]:
        return {}

    def row_extra(self) -> dict[str, object]:
        """What the backend was asked to do that shapes the result (for rows' extra)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional
        """Release communicators."""

    def reserve(self, points: list[Point]) -> None:  # noqa: B027 - optional
        """Told every point of the run before the first, for backends that allocate
        once for all of them (as nccl-tests does)."""

    def empty_for(self, role: str, n: int, dtype: str) -> Array:
        """The array of one role (SEND or RECV; in place, the whole buffer is RECV): a
        view of the blocks ``reserve`` allocated, if it did, else a new one."""
        if self.arenas is not None:
            return self.arenas.view(role, n, dtype)
        return self.empty(n, dtype)

    def allocate(self, point: Point, in_place: bool) -> Buffers:
        c = point.counts
        if in_place:
            whole = self.empty_for(RECV, max(point.buffer_elements(self.rank), 1), point.dtype)
            so = c.send_inplace_offset * self.rank
            ro = c.recv_inplace_offset * self.rank
            return Buffers(whole[so : so + c.send], whole[ro : ro + c.recv], [whole])
        send = self.empty_for(SEND, max(c.send, 1), point.dtype)[: c.send]
        recv = self.empty_for(RECV, max(c.recv, 1), point.dtype)[: c.recv]
        return Buffers(send, recv, [send, recv])
