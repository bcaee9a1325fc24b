"""Units and line rates, as nccl-tests and the PCIe/NVLink specs define them.

GB/s means 1e9 bytes per second; sizes are bytes; K/M/G suffixes are binary
(1K = 1024) as nccl-tests' -b/-e options read them.
"""

from __future__ import annotations

import re

from gpulane.errors import InputError

GB = 1e9

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
# "Gb", "Mbit": lowercase b is bits (network rates); a size in bits is refused.
_BITS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?b|bits?)\s*$", re.IGNORECASE)

# Usable bytes per second per lane and direction, after line encoding
# (8b/10b for Gen1-2, 128b/130b for Gen3-5, FLIT/PAM4 for Gen6).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.56}
# Transfer rate in GT/s printed by lspci/sysfs for each generation.
PCIE_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
# Per-link, per-direction NVLink rate when NVML does not say (NVLink4, H100/H200).
NVLINK4_LINK_GBPS = 26.5625


def parse_size(value: str | int | float, what: str = "size") -> int:
    """Read ``8``, ``64K``, ``1M``, ``8G`` (binary suffixes) as bytes."""
    if isinstance(value, bool):
        raise InputError(f"{what}: expected a size like 8, 64K, 1M or 8G, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise InputError(f"{what}: a size cannot be negative ({value})")
        return value
    if isinstance(value, float):
        if value < 0 or value != int(value):
            raise InputError(f"{what}: expected a whole number of bytes, got {value!r}")
        return int(value)
    text = str(value)
    bits = _BITS_RE.match(text)
    if bits and not text.rstrip().endswith("B"):  # 1GB, 1GiB: bytes
        number, suffix = bits.groups()
        unit = suffix.upper()
        hint = f"{number}{unit}' or '{number}{unit}iB" if unit else f"{number}"
        raise InputError(
            f"{what}: {value!r} reads as bits (lowercase b); sizes are bytes: "
            f"did you mean '{hint}'?"
        )
    m = _SIZE_RE.match(text)
    if not m:
        raise InputError(f"{what}: expected a size like 8, 64K, 1M or 8G, got {value!r}")
    number, suffix = m.groups()
    n = float(number) * _SUFFIX[suffix.upper()]
    if n != int(n):
        raise InputError(f"{what}: {value!r} is not a whole number of bytes")
    return int(n)


def format_size(n: int) -> str:
    """Short binary form: 8 B, 64 KiB, 1 MiB, 8 GiB (exact when it divides)."""
    for suffix, unit in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {suffix}"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


def pcie_gen_from_gts(gts: float) -> int | None:
    """PCIe generation from a transfer rate in GT/s (2.5 -> 1, ..., 64 -> 6)."""
    for gen, rate in PCIE_GTS.items():
        if abs(rate - gts) < 0.01:
            return gen
    return None


def pcie_gbps(gen: int, width: int) -> float:
    """Usable bandwidth per direction of a PCIe link, in GB/s."""
    if gen not in PCIE_LANE_GBPS:
        raise InputError(f"PCIe generation {gen} is not one of {sorted(PCIE_LANE_GBPS)}")
    return PCIE_LANE_GBPS[gen] * width


def nvlink_gbps(links: int, per_link_gbps: float = NVLINK4_LINK_GBPS) -> float:
    """Per-direction bandwidth of a bonded set of NVLinks, in GB/s."""
    return links * per_link_gbps


def size_steps(
    min_bytes: str | int,
    max_bytes: str | int,
    factor: float | None = 2,
    step: str | int | None = None,
) -> list[int]:
    """Sizes from min to max (inclusive), multiplying by ``factor`` or adding ``step``.

    Exactly one of factor/step drives the sweep; ``step`` wins when both are given,
    as nccl-tests' -i overrides -f.
    """
    lo = parse_size(min_bytes, "sizes.min")
    hi = parse_size(max_bytes, "sizes.max")
    if hi < lo:
        raise InputError(f"sizes: max ({max_bytes}) is below min ({min_bytes}); swap them")
    if step is not None:
        inc = parse_size(step, "sizes.step")
        if inc <= 0:
            raise InputError("sizes.step: must be a positive number of bytes")
        return list(range(lo, hi + 1, inc))
    if factor is None or float(factor) <= 1:
        if lo == hi:
            return [lo]
        raise InputError(f"sizes.factor: must be greater than 1 (got {factor}), or set sizes.step")
    if lo == 0:
        raise InputError(
            "sizes.min: 0 cannot grow by a factor; start at 1 or more, or set sizes.step"
        )
    out: list[int] = []
    size = lo
    while size <= hi:
        out.append(size)
        size = int(size * float(factor))
    return out
