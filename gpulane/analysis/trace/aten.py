"""What torch.profiler records about an aten op: tensor bytes from its shapes, and
whether a copy_ was asked to be non-blocking.

With ``record_shapes=True`` every op carries "Input Dims" and "Input type"; that is the
only byte count a trace without GPU memcpy events has, and it also fills in the bytes of
a GPU copy whose event lacks them.
"""

from __future__ import annotations

from typing import Any

# Element sizes for the "Input type" strings torch.profiler records.
_ELEMENT_SIZE = {
    "bool": 1,
    "unsigned char": 1,
    "signed char": 1,
    "char": 1,
    "short": 2,
    "short int": 2,
    "int": 4,
    "long": 8,
    "long int": 8,
    "long long": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "float": 4,
    "double": 8,
    "c10::complex<c10::Half>": 4,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1,
    "c10::quint8": 1,
    "c10::qint8": 1,
    "c10::qint32": 4,
    "unsigned short": 2,
    "unsigned int": 4,
    "unsigned long": 8,
}

# The op that moves bytes between tensors (nested ops such as aten::to end in it).
CPU_COPY_OPS = ("aten::copy_",)
# Runtime calls by which the host waits for the device: one inside a copy_ makes it blocking.
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def element_size(type_name: str) -> int | None:
    """Bytes per element of a profiler "Input type" string; None for one not known."""
    return _ELEMENT_SIZE.get(type_name.strip())


def tensor_bytes(dims: Any, type_name: Any) -> int | None:
    """numel × element size from a profiler "Input Dims" entry and its "Input type"."""
    if not isinstance(dims, list) or not isinstance(type_name, str):
        return None
    size = element_size(type_name)
    if size is None:
        return None
    numel = 1
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            return None
        numel *= d
    return numel * size


def copy_bytes(args: dict[str, Any]) -> int | None:
    """Bytes of an aten::copy_(self, src, non_blocking): the source tensor's size."""
    dims = args.get("Input Dims")
    types = args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    for i in (1, 0):  # src, then self (same numel; dtype may differ)
        if i < len(dims) and i < len(types):
            b = tensor_bytes(dims[i], types[i])
            if b is not None:
                return b
    return None


def non_blocking(args: dict[str, Any]) -> bool | None:
    """The non_blocking argument of aten::copy_, from "Concrete Inputs" when recorded."""
    ci = args.get("Concrete Inputs")
    if isinstance(ci, list) and len(ci) >= 3:
        v = str(ci[2]).strip().lower()
        if v in ("true", "1"):
            return True
        if v in ("false", "0"):
            return False
    return None
