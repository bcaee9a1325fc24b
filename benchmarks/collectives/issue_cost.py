"""Host time per issued call of backend=nccl's timed loop, on a CPU machine.

NCCL itself is replaced by a library of the same prototypes whose functions only log
their arguments (tests/fixtures/nccl_fake/fake_nccl.c, loaded by nccl4py as
libnccl.so.2 through LD_LIBRARY_PATH), so what is timed is everything *but* NCCL: the
Python loop, nccl4py's binding, the argument conversion, the stream lookup. Each way of
issuing is timed over N calls, best of R repeats.

    mkdir -p /tmp/fakenccl && gcc -O2 -shared -fPIC -Wl,-soname,libnccl.so.2 \
        -o /tmp/fakenccl/libnccl.so.2 tests/fixtures/nccl_fake/fake_nccl.c
    LD_LIBRARY_PATH=/tmp/fakenccl python benchmarks/collectives/issue_cost.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpulane.collectives.backends.nccl_calls import NcclCall, nccl_calls
from gpulane.collectives.backends.nccl_loop import CLoop, library, nccl4py_symbols, python_loop
from gpulane.collectives.spec import plan_point

N = 200_000
R = 5
SEND, RECV, STREAM = 0x1000, 0x2000, 0x6000


def best_ns(loop: Callable[[int], None]) -> float:
    out = []
    for _ in range(R):
        t0 = time.perf_counter_ns()
        loop(N)
        out.append((time.perf_counter_ns() - t0) / N)
    return min(out)


def python_repeat(fn: Callable[[], None]) -> Callable[[int], None]:
    def loop(n: int) -> None:
        for _ in range(n):
            fn()

    return loop


def calls_of(op: str) -> list[NcclCall]:
    addr = {"send": SEND, "recv": RECV}
    return [
        NcclCall(c.fn, tuple(addr[a] if isinstance(a, str) else a for a in c.args))
        for c in nccl_calls(plan_point(op, 1 << 20, "float", "sum", 0, 2), 0)
    ]


def before_change(b: Any, calls: list[NcclCall], comm: Any) -> Callable[[], None]:
    """The loop body as it was: the binding looked up once, the stream looked up per call
    (``abs``, a C builtin of one argument, stands in for torch's raw stream lookup)."""
    resolved = [(getattr(b, c.fn), c.args) for c in calls]
    lookup = abs
    if len(resolved) == 1:
        ((fn, args),) = resolved

        def one() -> None:
            fn(*args, comm, lookup(1))

        return one

    def grouped() -> None:
        stream = lookup(1)
        b.group_start()
        for fn, args in resolved:
            fn(*args, comm, stream)
        b.group_end()

    return grouped


def main() -> None:
    from nccl.bindings import nccl as b

    comm = b.Comm(0x5000)
    lib = library()
    symbols = nccl4py_symbols()
    print(f"# ns per issued operation (best of {R} x {N}); NCCL replaced by a logging stub")
    print("| collective | before (closure, stream looked up) | Python, pre-bound | C loop |")
    print("|---|---|---|---|")
    for op in ("all_reduce", "sendrecv"):
        calls = calls_of(op)
        bound = python_loop(
            [(getattr(b, c.fn), c.args) for c in calls], comm, STREAM, (b.group_start, b.group_end)
        )
        cloop = CLoop(lib, calls, symbols, comm.handle, STREAM)
        cells = [
            best_ns(python_repeat(before_change(b, calls, comm))),
            best_ns(python_repeat(bound)),
            best_ns(cloop.repeat),
        ]
        print(f"| {op} | " + " | ".join(f"{c:.0f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
