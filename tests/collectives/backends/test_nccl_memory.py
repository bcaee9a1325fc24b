"""Buffers from ncclMemAlloc: the sizing of the run's blocks and the option checks.

The allocation itself needs a GPU (recorded in benchmarks/collectives/); what can go
wrong without one is here: blocks too small for a point, and bad options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpulane.collectives.backends.base import RECV, SEND, Backend, Buffers
from gpulane.collectives.backends.nccl_memory import CudaPointer, arena_bytes, memory_options
from gpulane.collectives.spec import DTYPES, Point, plan_point
from gpulane.errors import InputError
from tests.helpers import gpulane

OPS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"]


class Recording(Backend):
    """Records what allocate() asks of each role, in bytes."""

    name = "recording"

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.asked: dict[str, int] = {SEND: 0, RECV: 0}

    def empty_for(self, role: str, n: int, dtype: str) -> Any:
        self.asked[role] = max(self.asked[role], n * DTYPES[dtype].itemsize)
        return range(n)  # sliceable, and costs nothing

    def empty(self, n: int, dtype: str) -> Any:
        raise AssertionError("allocate must go through empty_for")

    def launch(self, point: Point, bufs: Buffers) -> None:
        raise NotImplementedError

    def time_loop(self, fn: Any, iters: int) -> list[float]:
        raise NotImplementedError


@given(
    st.lists(
        st.tuples(
            st.sampled_from(OPS),
            st.integers(min_value=1, max_value=1 << 26),
            st.sampled_from(["float", "bfloat16", "int8", "double"]),
        ),
        min_size=1,
        max_size=8,
    ),
    st.integers(min_value=2, max_value=8),
    st.data(),
)
def test_blocks_hold_every_point_in_and_out_of_place(
    specs: list[tuple[str, int, str]], nranks: int, data: st.DataObject
) -> None:
    points = [plan_point(op, size, dt, "sum", 0, nranks) for op, size, dt in specs]
    rank = data.draw(st.integers(min_value=0, max_value=nranks - 1))
    sizes = arena_bytes(points, rank)
    backend = Recording(rank)
    for p in points:
        backend.allocate(p, in_place=True)
        backend.allocate(p, in_place=False)
    assert backend.asked[SEND] <= sizes[SEND]
    assert backend.asked[RECV] <= sizes[RECV]


def test_blocks_are_as_big_as_the_biggest_point_needs() -> None:
    # all_gather of 64 MiB on 2 ranks: each sends 32 MiB into a 64 MiB receive buffer
    p = plan_point("all_gather", 64 << 20, "float", "sum", 0, 2)
    assert arena_bytes([p], 0) == {SEND: 32 << 20, RECV: 64 << 20}
    q = plan_point("all_reduce", 1 << 30, "bfloat16", "sum", 0, 2)
    assert arena_bytes([p, q], 1) == {SEND: 1 << 30, RECV: 1 << 30}


def test_memory_options() -> None:
    assert memory_options({}) == ("torch", False)
    assert memory_options({"memory": "NCCL", "register": True}) == ("nccl", True)
    with pytest.raises(InputError, match=r"backend.memory: expected torch or nccl, got 'cuda'"):
        memory_options({"memory": "cuda"})
    with pytest.raises(InputError, match=r"backend.register=true needs backend.memory=nccl"):
        memory_options({"register": True})
    with pytest.raises(InputError, match=r"backend.register: expected true or false"):
        memory_options({"memory": "nccl", "register": "yes"})


def test_pointer_is_described_as_bytes_without_copy() -> None:
    iface = CudaPointer(0x7F0000000000, 4096).__cuda_array_interface__
    assert iface["shape"] == (4096,)
    assert iface["typestr"] == "|u1"
    assert iface["data"] == (0x7F0000000000, False)


def test_bad_memory_options_stop_a_torch_run_with_one_line(tmp_path: Path) -> None:
    for args, message in (
        (["backend.memory=nccl"], "backend.memory=nccl needs GPUs (device=cuda)"),
        (["backend.memory=pinned"], "backend.memory: expected torch or nccl, got 'pinned'"),
        # register is a key of backend=nccl only (ncclCommRegister through nccl4py)
        (
            ["+backend.register=true"],
            "unknown key 'backend.register' (keys: memory); it is a key of backend=auto, backend=nccl",
        ),
    ):
        args = ["backend=torch", *args]
        out = gpulane(
            "sweep",
            "ranks=2",
            "device=cpu",
            "sizes.max=1K",
            f"results_dir={tmp_path}",
            *args,
            cwd=tmp_path,
        )
        assert out.returncode == 2, out.stderr
        assert message in out.stderr
        assert "Traceback" not in out.stderr
