"""How backend=nccl issues a point's calls: pre-bound nccl4py calls from Python
(``backend.loop=python``), or a small C loop (``backend.loop=c``, nccl_loop.c) built at run
time with the system's C compiler and called through ctypes once per timed loop.

Either way every argument is bound once per point; the timed loop pays for the NCCL
calls and nothing else. The C loop calls the very functions nccl4py resolved in the
libnccl it loaded (``nccl.bindings._internal.nccl._inspect_function_pointer``), so the
communicator nccl4py made is valid there.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpulane.collectives.backends.nccl_calls import NcclCall
from gpulane.errors import MissingComponent

LOOPS = ("auto", "python", "c")
SOURCE = Path(__file__).with_name("nccl_loop.c")

# nccl4py's binding name -> (NCCL's symbol, the shape of its arguments in nccl_loop.c)
REDUCE_OP, ROOT_OP, ROOT, PLAIN, PEER = range(5)
SYMBOLS: dict[str, tuple[str, int]] = {
    "all_reduce": ("ncclAllReduce", REDUCE_OP),
    "reduce_scatter": ("ncclReduceScatter", REDUCE_OP),
    "reduce": ("ncclReduce", ROOT_OP),
    "broadcast": ("ncclBroadcast", ROOT),
    "all_gather": ("ncclAllGather", PLAIN),
    "allto_all": ("ncclAlltoAll", PLAIN),
    "send": ("ncclSend", PEER),
    "recv": ("ncclRecv", PEER),
}
GROUP = ("ncclGroupStart", "ncclGroupEnd")


class GlCall(ctypes.Structure):
    """struct gl_call of nccl_loop.c."""

    _fields_ = (
        ("shape", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("op", ctypes.c_int),
        ("root", ctypes.c_int),
        ("fn", ctypes.c_void_p),
        ("send", ctypes.c_void_p),
        ("recv", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
    )


class NcclLoopError(RuntimeError):
    """An NCCL call of the C loop returned an error."""


def gl_call(call: NcclCall, fn: int) -> GlCall:
    """One resolved call (addresses in place of SEND/RECV) as the C loop's struct."""
    shape = SYMBOLS[call.fn][1]
    a = call.args
    if shape == REDUCE_OP:  # send, recv, count, dtype, op
        return GlCall(shape, a[3], a[4], 0, fn, a[0], a[1], a[2])
    if shape == ROOT_OP:  # send, recv, count, dtype, op, root
        return GlCall(shape, a[3], a[4], a[5], fn, a[0], a[1], a[2])
    if shape == ROOT:  # send, recv, count, dtype, root
        return GlCall(shape, a[3], 0, a[4], fn, a[0], a[1], a[2])
    if shape == PLAIN:  # send, recv, count, dtype
        return GlCall(shape, a[3], 0, 0, fn, a[0], a[1], a[2])
    # PEER: buffer, count, dtype, peer
    return GlCall(shape, a[2], 0, a[3], fn, a[0], None, a[1])


# -- building -------------------------------------------------------------------------------
def compiler() -> list[str]:
    """The C compiler: $CC, else the one Python was built with if it is on this machine
    (a relocated Python names its build machine's), else cc, gcc or clang."""
    for cc in (os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc", "gcc", "clang"):
        words = shlex.split(str(cc or ""))
        if words and shutil.which(words[0]):
            return words
    return ["cc"]  # not found: building says so in one line


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpulane"


def build(cc: Sequence[str] | None = None, where: Path | None = None) -> Path:
    """The loop's shared library, compiled once per source and compiler (cached; ranks
    that build at the same moment each write their own file and rename it into place)."""
    cc = list(cc or compiler())
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + " ".join(cc).encode()).hexdigest()[:16]
    places = [where] if where is not None else [cache_dir(), Path(tempfile.gettempdir())]
    last: OSError | None = None
    for place in places:
        lib = place / f"gpulane-nccl-loop-{key}.so"
        if lib.exists():
            return lib
        try:
            place.mkdir(parents=True, exist_ok=True)
            tmp = place / f".{lib.name}.{os.getpid()}"
            _compile(cc, tmp)
            os.replace(tmp, lib)
            return lib
        except OSError as err:  # not writable: try the next place
            last = err
    raise MissingComponent(f"backend.loop=c: cannot write the loop's library ({last})")


def _compile(cc: list[str], out: Path) -> None:
    cmd = [*cc, "-O2", "-shared", "-fPIC", "-o", str(out), str(SOURCE)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise MissingComponent(
            f"backend.loop=c needs a C compiler ({shlex.join(cc)}: {err}); set CC, or use "
            "backend.loop=python"
        ) from err
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise MissingComponent(
            f"backend.loop=c: {shlex.join(cc)} could not build {SOURCE.name}: "
            f"{said[0] if said else f'exit {done.returncode}'}; use backend.loop=python"
        )


class LoopLibrary:
    """The built loop, with its one function's signature declared."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dll = ctypes.CDLL(str(path))
        self.issue = self.dll.gl_issue
        self.issue.restype = ctypes.c_int
        self.issue.argtypes = (
            ctypes.POINTER(GlCall),
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_long,
            ctypes.POINTER(ctypes.c_long),
        )
        self.timed = self.dll.gl_timed
        self.timed.restype = ctypes.c_int
        self.timed.argtypes = (
            *self.issue.argtypes,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        )
        size = self.dll.gl_call_size
        size.restype = ctypes.c_size_t
        if size() != ctypes.sizeof(GlCall):
            raise MissingComponent(
                f"backend.loop=c: {path.name} lays out a call in {size()} bytes, "
                f"gpulane in {ctypes.sizeof(GlCall)}; use backend.loop=python"
            )


@functools.cache
def library(cc: tuple[str, ...] | None = None) -> LoopLibrary:
    return LoopLibrary(build(cc))


def driver_event_record() -> int:
    """The address of the CUDA driver's cuEventRecord (libcuda is loaded once torch has
    initialized CUDA; its events and streams are the runtime's)."""
    try:
        return int(
            ctypes.cast(ctypes.CDLL("libcuda.so.1").cuEventRecord, ctypes.c_void_p).value or 0
        )
    except (OSError, AttributeError):
        return 0


# -- NCCL's functions as nccl4py loaded them ------------------------------------------------
def nccl4py_symbols() -> Callable[[str], int]:
    """name -> address of that function in the libnccl nccl4py loaded (0: not there)."""
    from nccl.bindings._internal import nccl as loaded

    def address(name: str) -> int:
        for key in (f"__{name}", name):
            try:
                return int(loaded._inspect_function_pointer(key) or 0)
            except (KeyError, AttributeError):
                continue
        return 0

    return address


def missing_symbols(address: Callable[[str], int]) -> list[str]:
    """The functions the C loop may call that ``address`` does not find."""
    return [name for name in (*(s for s, _ in SYMBOLS.values()), *GROUP) if not address(name)]


class CLoop:
    """A point's calls bound once; ``repeat(n)`` issues them n times from C."""

    def __init__(
        self,
        lib: LoopLibrary,
        calls: list[NcclCall],
        address: Callable[[str], int],
        comm: int,
        stream: int,
        error_string: Callable[[int], str] | None = None,
        record: int = 0,
    ) -> None:
        missing = [c.fn for c in calls if c.fn not in SYMBOLS]
        if missing:
            raise ValueError(f"backend.loop=c has no call shape for {missing}")
        fns = {c.fn: address(SYMBOLS[c.fn][0]) for c in calls}
        group = [address(g) for g in GROUP] if len(calls) > 1 else [0, 0]
        absent = [SYMBOLS[n][0] for n, a in fns.items() if not a]
        absent += [g for g, a in zip(GROUP, group, strict=True) if len(calls) > 1 and not a]
        if absent:
            raise MissingComponent(
                f"backend.loop=c: the loaded libnccl has no {', '.join(absent)}; "
                "use backend.loop=python"
            )
        self.calls = (GlCall * len(calls))(*(gl_call(c, fns[c.fn]) for c in calls))
        self.names = [SYMBOLS[c.fn][0] for c in calls]
        self.lib = lib
        self.args = (self.calls, len(calls), group[0], group[1], comm, stream)
        self.where = ctypes.c_long(0)
        self.where_ref = ctypes.byref(self.where)
        self.error_string = error_string
        self.record = record
        if record:
            self.timed = self._timed

    def repeat(self, n: int) -> None:
        code = self.lib.issue(*self.args, n, self.where_ref)
        if code != 0:
            self._raise(code)

    def __call__(self) -> None:
        self.repeat(1)

    def _timed(self, n: int, start: int, end: int) -> None:
        """One untimed operation, the start event, n operations, the end event: all from
        C, so that Python's cost of calling in falls outside the two events."""
        code = self.lib.timed(*self.args, n, self.where_ref, self.record, start, end)
        if code != 0:
            if self.where.value < 0:
                which = "start" if self.where.value == -1 else "end"
                raise NcclLoopError(
                    f"cuEventRecord of the {which} event returned CUDA error {code}"
                )
            self._raise(code)

    def _raise(self, code: int) -> None:
        name = self.names[self.where.value % len(self.names)]
        said = ""
        if self.error_string is not None:
            try:
                said = f": {self.error_string(code)}"
            except Exception:
                said = ""
        raise NcclLoopError(f"{name} returned NCCL error {code}{said}")


def python_loop(
    calls: list[tuple[Callable[..., Any], tuple[Any, ...]]],
    comm: Any,
    stream: int,
    group: tuple[Callable[[], Any], Callable[[], Any]],
) -> Callable[[], None]:
    """A point's calls bound once as Python calls: one call is a partial of the binding
    (its arguments stored, nothing looked up when called); several make one group."""
    bound = [functools.partial(fn, *args, comm, stream) for fn, args in calls]
    if len(bound) == 1:
        return bound[0]
    start, end = group

    def grouped() -> None:
        start()
        for call in bound:
            call()
        end()

    return grouped
