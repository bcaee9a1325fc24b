"""backend.loop=c and the pre-bound Python loop, without a GPU: the C loop is built with the
real compiler and calls a stand-in libnccl of NCCL's prototypes that logs every call
(tests/fixtures/nccl_fake/fake_nccl.c); nccl4py's real bindings call the same stand-in, so
the two loops are checked to hand NCCL the same arguments."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpulane.collectives.backends.base import Buffers
from gpulane.collectives.backends.nccl import bound_calls, issue_options
from gpulane.collectives.backends.nccl_calls import NCCL_CALLS, NcclCall
from gpulane.collectives.backends.nccl_loop import (
    GROUP,
    SYMBOLS,
    CLoop,
    GlCall,
    LoopLibrary,
    NcclLoopError,
    build,
    compiler,
    library,
    missing_symbols,
    python_loop,
)
from gpulane.collectives.spec import plan_point
from gpulane.errors import InputError, MissingComponent

FAKE_SOURCE = Path(__file__).parents[2] / "fixtures" / "nccl_fake" / "fake_nccl.c"
NAMES = [
    "ncclAllReduce",
    "ncclReduceScatter",
    "ncclReduce",
    "ncclBroadcast",
    "ncclAllGather",
    "ncclAlltoAll",
    "ncclSend",
    "ncclRecv",
    "ncclGroupStart",
    "ncclGroupEnd",
    "cuEventRecord",
]
COMM, STREAM = 0x5000, 0x6000


class Entry(ctypes.Structure):
    _fields_ = (
        ("fn", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("op", ctypes.c_int),
        ("root", ctypes.c_int),
        ("send", ctypes.c_void_p),
        ("recv", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("comm", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    )


def build_fake(where: Path, source: Path = FAKE_SOURCE) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    out = where / "libnccl.so.2"
    subprocess.run(
        [*compiler(), "-O2", "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", "-o", out, source],
        check=True,
    )
    return out


class Fake:
    """The stand-in libnccl, loaded in this process."""

    def __init__(self, path: Path) -> None:
        self.dll = ctypes.CDLL(str(path))
        self.dll.fake_entry.restype = ctypes.POINTER(Entry)
        self.dll.fake_calls.restype = ctypes.c_long
        self.dll.ncclGetErrorString.restype = ctypes.c_char_p
        self.dll.fake_entry_size.restype = ctypes.c_size_t
        assert self.dll.fake_entry_size() == ctypes.sizeof(Entry)

    def address(self, name: str) -> int:
        try:
            return int(ctypes.cast(getattr(self.dll, name), ctypes.c_void_p).value or 0)
        except AttributeError:
            return 0

    def error_string(self, code: int) -> str:
        return self.dll.ncclGetErrorString(code).decode()

    def log(self) -> list[dict[str, object]]:
        out = []
        for i in range(self.dll.fake_calls()):
            e = self.dll.fake_entry(i).contents
            out.append(
                {
                    "fn": NAMES[e.fn],
                    "dtype": e.dtype,
                    "op": e.op,
                    "root": e.root,
                    "send": e.send or 0,
                    "recv": e.recv or 0,
                    "count": e.count,
                    "comm": e.comm or 0,
                    "stream": e.stream or 0,
                }
            )
        self.dll.fake_reset()
        return out


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Fake:
    return Fake(build_fake(tmp_path_factory.mktemp("fake")))


@pytest.fixture(scope="module")
def loop_lib(tmp_path_factory: pytest.TempPathFactory) -> LoopLibrary:
    return LoopLibrary(build(where=tmp_path_factory.mktemp("loop")))


def buffers(op: str, in_place: bool = False) -> tuple[Buffers, list[NcclCall]]:
    point = plan_point(op, 4096, "bfloat16", "max", 2, 4)
    send = torch.zeros(point.counts.send + 1, dtype=torch.bfloat16)
    recv = send if in_place else torch.zeros(point.counts.recv + 1, dtype=torch.bfloat16)
    bufs = Buffers(send, recv, [send, recv])
    return bufs, bound_calls(point, 1, bufs)


@pytest.mark.parametrize("op", sorted(NCCL_CALLS))
def test_c_loop_hands_nccl_every_argument(fake: Fake, loop_lib: LoopLibrary, op: str) -> None:
    bufs, calls = buffers(op)
    loop = CLoop(loop_lib, calls, fake.address, COMM, STREAM, fake.error_string)
    loop.repeat(3)
    log = fake.log()
    per_iter = [SYMBOLS[c.fn][0] for c in calls]
    if len(calls) > 1:
        per_iter = [GROUP[0], *per_iter, GROUP[1]]
    assert [e["fn"] for e in log] == per_iter * 3
    issued = [e for e in log if e["fn"] not in GROUP]
    for e in issued:
        assert (e["comm"], e["stream"]) == (COMM, STREAM)
        assert e["dtype"] == 9  # ncclBfloat16
        if e["fn"] in ("ncclAllReduce", "ncclReduceScatter", "ncclReduce"):
            assert e["op"] == 2  # ncclMax
        if e["fn"] in ("ncclReduce", "ncclBroadcast"):
            assert e["root"] == 2
    first = issued[: len(calls)]
    point = plan_point(op, 4096, "bfloat16", "max", 2, 4)
    if op == "sendrecv":  # rank 1 of 4 sends to 2 and receives from 0
        assert (first[0]["send"], first[0]["root"]) == (bufs.send.data_ptr(), 2)
        assert (first[1]["recv"], first[1]["root"]) == (bufs.recv.data_ptr(), 0)
        assert first[0]["count"] == first[1]["count"] == point.count
    else:
        (e,) = first
        assert (e["send"], e["recv"], e["count"]) == (
            bufs.send.data_ptr(),
            bufs.recv.data_ptr(),
            point.count,
        )
    loop()  # one call issues one operation
    assert len(fake.log()) == len(per_iter)


def test_timed_loop_has_only_the_calls_between_its_events(
    fake: Fake, loop_lib: LoopLibrary
) -> None:
    _bufs, calls = buffers("all_reduce")
    record = fake.address("fake_record")
    loop = CLoop(loop_lib, calls, fake.address, COMM, STREAM, fake.error_string, record)
    loop.timed(4, 0xE1, 0xE2)
    log = fake.log()
    assert [e["fn"] for e in log] == [
        "ncclAllReduce",
        "cuEventRecord",
        *["ncclAllReduce"] * 4,
        "cuEventRecord",
    ]
    assert [(e["send"], e["stream"]) for e in log if e["fn"] == "cuEventRecord"] == [
        (0xE1, STREAM),
        (0xE2, STREAM),
    ]
    with pytest.raises(
        NcclLoopError, match="cuEventRecord of the end event returned CUDA error 400"
    ):
        loop.timed(1, 0xE1, 0xBAD)
    fake.log()
    assert not hasattr(CLoop(loop_lib, calls, fake.address, COMM, STREAM), "timed")


def test_error_names_the_call_and_closes_the_group(fake: Fake, loop_lib: LoopLibrary) -> None:
    # The stand-in fails a call of count 77 with ncclInvalidArgument, as NCCL would.
    bad = [NcclCall("all_reduce", (0x10, 0x20, 77, 7, 0))]
    with pytest.raises(NcclLoopError, match=r"ncclAllReduce returned NCCL error 4: invalid arg"):
        CLoop(loop_lib, bad, fake.address, COMM, STREAM, fake.error_string).repeat(5)
    assert len(fake.log()) == 1  # it stopped at the first failure
    pair = [NcclCall("send", (0x10, 8, 7, 1)), NcclCall("recv", (0x20, 77, 7, 0))]
    with pytest.raises(NcclLoopError, match="ncclRecv returned NCCL error 4"):
        CLoop(loop_lib, pair, fake.address, COMM, STREAM, fake.error_string)()
    assert [e["fn"] for e in fake.log()] == [
        "ncclGroupStart",
        "ncclSend",
        "ncclRecv",
        "ncclGroupEnd",
    ]


def test_missing_symbols_are_named(fake: Fake, loop_lib: LoopLibrary) -> None:
    assert missing_symbols(fake.address) == []
    without = {"ncclAlltoAll", "ncclGroupEnd"}

    def partial(name: str) -> int:
        return 0 if name in without else fake.address(name)

    assert set(missing_symbols(partial)) == without
    with pytest.raises(MissingComponent, match="no ncclAlltoAll"):
        CLoop(loop_lib, [NcclCall("allto_all", (1, 2, 3, 7))], partial, COMM, STREAM)


def test_python_loop_binds_once_and_groups(fake: Fake) -> None:
    seen: list[tuple[object, ...]] = []

    def binding(*args: object) -> None:
        seen.append(args)

    one = python_loop([(binding, (1, 2, 3))], "comm", 9, (lambda: None, lambda: None))
    one()
    one()
    assert seen == [(1, 2, 3, "comm", 9)] * 2
    marks: list[str] = []
    two = python_loop(
        [(lambda *a: marks.append("send"), ()), (lambda *a: marks.append("recv"), ())],
        "comm",
        9,
        (lambda: marks.append("start"), lambda: marks.append("end")),
    )
    two()
    assert marks == ["start", "send", "recv", "end"]


def test_build_is_cached_and_a_missing_compiler_is_one_line(tmp_path: Path) -> None:
    lib = build(where=tmp_path)
    stamp = lib.stat().st_mtime_ns
    assert build(where=tmp_path) == lib and lib.stat().st_mtime_ns == stamp
    with pytest.raises(MissingComponent, match=r"backend.loop=c needs a C compiler"):
        build(["/nonexistent/cc"], where=tmp_path / "other")
    with pytest.raises(MissingComponent, match=r"could not build nccl_loop.c"):
        build(["false"], where=tmp_path / "other")
    assert library() is library()  # one build per process


def test_layout_mismatch_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "odd.c"
    source.write_text(
        "#include <stddef.h>\nsize_t gl_call_size(void) { return 3; }\n"
        "int gl_issue(void) { return 0; }\nint gl_timed(void) { return 0; }\n"
    )
    out = tmp_path / "odd.so"
    subprocess.run([*compiler(), "-shared", "-fPIC", "-o", out, source], check=True)
    with pytest.raises(MissingComponent, match=f"in 3 bytes, gpulane in {ctypes.sizeof(GlCall)}"):
        LoopLibrary(out)


def test_issue_options() -> None:
    assert issue_options({}) == ("auto", "own")
    assert issue_options({"loop": "C", "stream": "current"}) == ("c", "current")
    with pytest.raises(InputError, match=r"backend.loop: expected auto, python or c"):
        issue_options({"loop": "fast"})
    with pytest.raises(InputError, match=r"backend.stream: expected own or current"):
        issue_options({"stream": "default"})


SAME_ARGS = r"""
import json, sys
from gpulane.collectives.backends.nccl_calls import NCCL_CALLS, nccl_calls
from gpulane.collectives.backends.nccl_loop import CLoop, library, nccl4py_symbols, python_loop
from gpulane.collectives.spec import plan_point
from nccl.bindings import nccl as b
from nccl.bindings._internal import nccl as loaded
from tests.collectives.backends.test_nccl_loop import Fake, COMM, STREAM
from pathlib import Path
from gpulane.collectives.backends.nccl_calls import NcclCall

fake = Fake(Path(loaded._inspect_loaded_library_path()))
out = {}
for op in sorted(NCCL_CALLS):
    calls = [NcclCall(c.fn, tuple({"send": 0x1000, "recv": 0x2000}.get(a, a)
             if isinstance(a, str) else a for a in c.args))
             for c in nccl_calls(plan_point(op, 4096, "half", "min", 1, 4), 2)]
    comm = b.Comm(COMM)
    python_loop([(getattr(b, c.fn), c.args) for c in calls], comm, STREAM,
                (b.group_start, b.group_end))()
    from_python = fake.log()
    CLoop(library(), calls, nccl4py_symbols(), comm.handle, STREAM, b.get_error_string)()
    out[op] = [from_python, fake.log()]
print(json.dumps({"library": loaded._inspect_loaded_library_path(), "ops": out}))
"""


def test_c_loop_and_nccl4py_hand_nccl_the_same_arguments(tmp_path: Path) -> None:
    """nccl4py's real bindings load the stand-in as libnccl.so.2 (LD_LIBRARY_PATH); the C
    loop calls the functions nccl4py resolved there: both logs must be the same."""
    pytest.importorskip("nccl.bindings.nccl", reason="nccl4py is a test dependency")
    lib = build_fake(tmp_path / "lib")
    root = Path(__file__).parents[3]
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": str(lib.parent),
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        [sys.executable, "-c", SAME_ARGS], env=env, capture_output=True, text=True, cwd=root
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert Path(result["library"]).resolve() == lib.resolve()
    for op, (from_python, from_c) in result["ops"].items():
        assert from_python, op
        assert from_c == from_python, op
