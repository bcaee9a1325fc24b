"""The order of what the GPU timing issues, with a stand-in for torch.cuda (this machine
has no CUDA): a call with repeat(n) issues the timed loop itself, between the two events,
after one untimed call; graph capture happens on the stream the calls are bound to."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from gpulane.collectives.backends import cuda_timing


def fake_torch(log: list[str]) -> Any:
    class Event:
        made = 0

        def __init__(self, enable_timing: bool = False) -> None:
            Event.made += 1
            self.cuda_event = Event.made

        def record(self) -> None:
            log.append("event")

        def elapsed_time(self, other: Any) -> float:
            return 2.0  # ms

    class Graph:
        def replay(self) -> None:
            log.append("replay")

    @contextlib.contextmanager
    def graph(g: Any, stream: Any = None) -> Iterator[None]:
        log.append(f"capture on {stream}")
        yield

    cuda = SimpleNamespace(
        Event=Event,
        CUDAGraph=Graph,
        graph=graph,
        synchronize=lambda device=None: log.append("sync"),
    )
    return SimpleNamespace(cuda=cuda)


class Repeating:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __call__(self) -> None:
        self.log.append("call")

    def repeat(self, n: int) -> None:
        self.log.append(f"repeat {n}")


def test_loop_issued_by_the_call_itself() -> None:
    log: list[str] = []
    mean = cuda_timing.time_mean(fake_torch(log), "dev", Repeating(log), 20)
    assert log == ["call", "event", "repeat 20", "event", "sync"]
    assert mean == 2.0 / 1e3 / 20


class Timed(Repeating):
    def timed(self, n: int, start: int, end: int) -> None:
        self.log.append(f"timed {n} between {start} and {end}")


def test_timed_loop_issued_with_its_events() -> None:
    log: list[str] = []
    torch = fake_torch(log)
    mean = cuda_timing.time_mean(torch, "dev", Timed(log), 20)
    # the events are made (recorded once) first; the call issues everything else
    assert log == ["event", "event", "timed 20 between 1 and 2", "sync"]
    assert mean == 2.0 / 1e3 / 20


def test_python_loop_for_plain_calls() -> None:
    log: list[str] = []
    cuda_timing.time_mean(fake_torch(log), "dev", lambda: log.append("call"), 3)
    assert log == ["call", "event", "call", "call", "call", "event", "sync"]


def test_graph_captured_on_the_bound_stream() -> None:
    log: list[str] = []
    times = cuda_timing.time_graph(
        fake_torch(log), "dev", Repeating(log), 2, 3, lambda: log.append("barrier"), "S"
    )
    assert log[:3] == ["capture on S", "call", "call"]
    assert log.count("replay") == 4  # one upload, three timed
    assert times == [2.0 / 1e3 / 2] * 3
