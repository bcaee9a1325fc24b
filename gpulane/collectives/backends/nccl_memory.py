"""Buffers from NCCL's own allocator (ncclMemAlloc), optionally registered with the
communicator (ncclCommRegister), allocated once for the whole run as nccl-tests does.

Why: NCCL can move data straight between registered user buffers instead of through its
own staging buffers. In CUDA-graph mode it registers captured buffers itself
(NCCL_GRAPH_REGISTER), but not every allocation qualifies; ncclMemAlloc'd memory does.
torch sees the memory through ``__cuda_array_interface__``, without a copy.
"""

from __future__ import annotations

from typing import Any

from gpulane.collectives.backends.base import RECV, SEND
from gpulane.collectives.backends.nccl_bootstrap import import_nccl4py
from gpulane.collectives.spec import DTYPES, Point
from gpulane.errors import InputError

MEMORY_KINDS = ("torch", "nccl")


def memory_options(opts: dict[str, Any]) -> tuple[str, bool]:
    """backend.memory and backend.register, checked."""
    memory = str(opts.get("memory") or "torch").lower()
    if memory not in MEMORY_KINDS:
        raise InputError(f"backend.memory: expected torch or nccl, got {memory!r}")
    register = opts.get("register", False)
    if not isinstance(register, bool):
        raise InputError(f"backend.register: expected true or false, got {register!r}")
    if register and memory != "nccl":
        raise InputError("backend.register=true needs backend.memory=nccl")
    return memory, register


def arena_bytes(points: list[Point], rank: int) -> dict[str, int]:
    """Bytes of the send and receive blocks that hold every point's buffers (in place,
    the whole buffer lives in the receive block)."""
    need = {SEND: 1, RECV: 1}
    for p in points:
        item = DTYPES[p.dtype].itemsize
        c = p.counts
        # allocate() asks for at least one element, even for an empty point
        need[SEND] = max(need[SEND], max(c.send, 1) * item)
        need[RECV] = max(need[RECV], max(c.recv, p.buffer_elements(rank), 1) * item)
    return need


def ncclmem_arenas(
    torch: Any, device: Any, points: list[Point], rank: int, comm: Any = None
) -> NcclArenas:
    """Blocks for every point of the run from ncclMemAlloc (nccl4py's binding), registered
    with ``comm`` (a raw NCCL communicator) when one is given."""
    _core, bindings = import_nccl4py("backend.memory=nccl")
    return NcclArenas(
        bindings, torch, device, comm, arena_bytes(points, rank), register=comm is not None
    )


class CudaPointer:
    """Raw device memory as an object torch.as_tensor takes without copying."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
        }


class NcclArenas:
    """One ncclMemAlloc'd block per role, viewed as torch tensors of any dtype."""

    def __init__(
        self,
        bindings: Any,
        torch: Any,
        device: Any,
        comm: Any,
        sizes: dict[str, int],
        register: bool,
    ) -> None:
        self.b, self.torch, self.comm = bindings, torch, comm
        self.ptrs: list[int] = []
        self.handles: list[int] = []
        self.blocks: dict[str, Any] = {}
        for role, nbytes in sizes.items():
            ptr = int(bindings.mem_alloc(nbytes))
            self.ptrs.append(ptr)
            if register:
                self.handles.append(int(bindings.comm_register(comm, ptr, nbytes)))
            self.blocks[role] = torch.as_tensor(CudaPointer(ptr, nbytes), device=device)

    def view(self, role: str, n: int, dtype: str) -> Any:
        spec = DTYPES[dtype]
        block = self.blocks[role]
        return block[: n * spec.itemsize].view(getattr(self.torch, spec.torch_name))

    def free(self) -> None:
        """Deregister and free; the caller has synchronized the device."""
        self.blocks = {}
        for h in self.handles:
            self.b.comm_deregister(self.comm, h)
        for ptr in self.ptrs:
            self.b.mem_free(ptr)
        self.handles, self.ptrs = [], []
