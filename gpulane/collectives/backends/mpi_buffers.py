"""The MPI backend's buffers: numpy arrays on the host, or torch tensors / CuPy arrays on
the rank's GPU when the MPI library is CUDA-aware, with the checks' operations on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpulane.collectives.backends.base import Buffers
from gpulane.collectives.backends.torch_common import TorchOps
from gpulane.collectives.spec import DTYPES
from gpulane.collectives.values import Array
from gpulane.errors import InputError, MissingComponent
from gpulane.rank import RankContext


# -- arrays ---------------------------------------------------------------------------
class ArrayModuleOps:
    """The checks' array operations for numpy (host buffers) or CuPy (device buffers)."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp

    def arange(self, lo: int, hi: int) -> Array:
        return self.xp.arange(lo, hi, dtype=self.xp.int64)

    def minimum(self, a: Array, b: Array) -> Array:
        return self.xp.minimum(a, b)

    def maximum(self, a: Array, b: Array) -> Array:
        return self.xp.maximum(a, b)

    def write(self, buf: Array, lo: int, values: Array) -> None:
        buf[lo : lo + values.shape[0]] = values

    def zero(self, buf: Array) -> None:
        buf.fill(0)

    def count_mismatch(self, buf: Array, lo: int, expected: Array, tol: float) -> int:
        xp = self.xp
        got = buf[lo : lo + expected.shape[0]].astype(xp.float64)
        want = expected.astype(xp.float64)
        diff = xp.abs(got - want)
        if tol:
            diff = diff / xp.maximum(xp.abs(want), 1.0)
        return int((diff > tol).sum())


@dataclass
class MpiBuffers(Buffers):
    in_place: bool = False


# -- device buffers -----------------------------------------------------------------------
class Gpu:
    """One rank's GPU: torch CUDA tensors (or CuPy arrays) and CUDA events."""

    def __init__(self, kind: str, mod: Any, index: int) -> None:
        self.kind = kind
        self.mod = mod
        self.index = index
        if kind == "torch":
            self.device = mod.device("cuda", index)
            self.ops: Any = TorchOps(mod, self.device)
            self.has_bfloat16 = True
        else:
            self.ops = ArrayModuleOps(mod)
            self.has_bfloat16 = False

    @classmethod
    def open(cls, ctx: RankContext, array: str, required: bool) -> Gpu | None:
        """This rank's GPU, selected; None when there is none and none is required."""
        kinds = ["torch", "cupy"] if array == "auto" else [array]
        errors: list[str] = []
        for kind in kinds:
            try:
                mod = __import__(kind)
            except ImportError:
                errors.append(f"{kind} is not installed")
                continue
            try:
                count = (
                    int(mod.cuda.device_count())
                    if kind == "torch" and mod.cuda.is_available()
                    else (int(mod.cuda.runtime.getDeviceCount()) if kind == "cupy" else 0)
                )
            except Exception as err:
                errors.append(f"{kind} sees no GPU ({str(err).strip().splitlines()[0]})")
                continue
            if count == 0:
                errors.append(f"{kind} sees no GPU")
                continue
            if ctx.local_rank >= count:
                raise MissingComponent(
                    f"rank {ctx.rank} wants GPU {ctx.local_rank} but this host has {count}; "
                    "run with fewer ranks per host"
                )
            if kind == "torch":
                mod.cuda.set_device(ctx.local_rank)
            else:
                mod.cuda.Device(ctx.local_rank).use()
            return cls(kind, mod, ctx.local_rank)
        if required:
            raise MissingComponent(
                f"device=cuda but no GPU here ({'; '.join(errors)}); use device=cpu"
            )
        return None

    def empty(self, n: int, dtype: str) -> Array:
        dt = DTYPES[dtype]
        if self.kind == "torch":
            return self.mod.empty(n, dtype=getattr(self.mod, dt.torch_name), device=self.device)
        if dt.numpy_name is None:
            raise InputError(f"CuPy has no {dtype}; use backend.array=torch")
        return self.mod.empty(n, dtype=dt.numpy_name)

    def words(self, buf: Array) -> Array:
        """The same memory as 16-bit integers, for 16-bit floats that MPI only moves."""
        if self.kind == "torch":
            return buf.view(self.mod.int16)
        return buf.view(self.mod.uint16)

    def synchronize(self) -> None:
        if self.kind == "torch":
            self.mod.cuda.synchronize(self.device)
        else:
            self.mod.cuda.Device(self.index).synchronize()

    def time_loop(self, fn: Callable[[], None], iters: int) -> list[float]:
        if self.kind == "torch":
            cuda = self.mod.cuda
            events = [cuda.Event(enable_timing=True) for _ in range(iters + 1)]
            events[0].record()
            for i in range(iters):
                fn()
                events[i + 1].record()
            cuda.synchronize(self.device)
            return [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(iters)]
        cuda = self.mod.cuda
        evs = [cuda.Event() for _ in range(iters + 1)]
        evs[0].record()
        for i in range(iters):
            fn()
            evs[i + 1].record()
        evs[-1].synchronize()
        return [cuda.get_elapsed_time(evs[i], evs[i + 1]) / 1e3 for i in range(iters)]

    def versions(self) -> dict[str, str]:
        mod = self.mod
        if self.kind == "torch":
            return {
                "torch": str(mod.__version__),
                "cuda": str(mod.version.cuda),
                "gpu": str(mod.cuda.get_device_name(self.device)),
            }
        props = mod.cuda.runtime.getDeviceProperties(self.index)
        name = props.get("name", b"")
        return {
            "cupy": str(mod.__version__),
            "cuda": str(mod.cuda.runtime.runtimeGetVersion()),
            "gpu": name.decode() if isinstance(name, bytes) else str(name),
        }
