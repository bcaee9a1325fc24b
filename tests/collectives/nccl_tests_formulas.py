"""nccl-tests' own bandwidth formulas, written out here from its source and not from
gpulane's spec, so that a test comparing the two can disagree.

Quoted from NVIDIA/nccl-tests, src/<collective>.cu, function <Collective>GetBw
(commit a0b82b2260cf5152b9f8c061bbf7eaf0ba096432). ``count`` is the count nccl-tests
passes to NCCL and prints in its ``count`` column; every GetBw sets ``*algBw = baseBw``:

    all_reduce.cu      baseBw = count * typesize / 1.0E9 / sec
                       factor = 2*(nranks - 1) / nranks
    all_gather.cu      baseBw = count * typesize * nranks / 1.0E9 / sec
                       factor = (nranks - 1) / nranks
    reduce_scatter.cu  baseBw = count * typesize * nranks / 1.0E9 / sec
                       factor = (nranks - 1) / nranks
    alltoall.cu        baseBw = count * nranks * typesize / 1.0E9 / sec
                       factor = (nranks-1) / (nranks)
    broadcast.cu       baseBw = count * typesize / 1.0E9 / sec
                       factor = 1
    reduce.cu          baseBw = count * typesize / 1.0E9 / sec
                       *busBw = baseBw
    sendrecv.cu        baseBw = count * typesize / 1.0E9 / sec
                       factor = 1
    gather.cu          baseBw = count * nranks * typesize / 1.0E9 / sec
                       factor = (nranks-1) / (nranks)
    scatter.cu         baseBw = count * nranks * typesize / 1.0E9 / sec
                       factor = (nranks-1) / (nranks)

    *busBw = baseBw * factor
"""

from __future__ import annotations

from collections.abc import Callable

# collective -> (count, typesize, sec, nranks) -> (algBw, busBw) in GB/s
GET_BW: dict[str, Callable[[int, int, float, int], tuple[float, float]]] = {
    "all_reduce": lambda c, t, s, n: (c * t / 1e9 / s, c * t / 1e9 / s * 2 * (n - 1) / n),
    "all_gather": lambda c, t, s, n: (c * t * n / 1e9 / s, c * t * n / 1e9 / s * (n - 1) / n),
    "reduce_scatter": lambda c, t, s, n: (c * t * n / 1e9 / s, c * t * n / 1e9 / s * (n - 1) / n),
    "alltoall": lambda c, t, s, n: (c * n * t / 1e9 / s, c * n * t / 1e9 / s * (n - 1) / n),
    "broadcast": lambda c, t, s, n: (c * t / 1e9 / s, c * t / 1e9 / s * 1),
    "reduce": lambda c, t, s, n: (c * t / 1e9 / s, c * t / 1e9 / s),
    "sendrecv": lambda c, t, s, n: (c * t / 1e9 / s, c * t / 1e9 / s * 1),
    "gather": lambda c, t, s, n: (c * n * t / 1e9 / s, c * n * t / 1e9 / s * (n - 1) / n),
    "scatter": lambda c, t, s, n: (c * n * t / 1e9 / s, c * n * t / 1e9 / s * (n - 1) / n),
}


def nccl_tests_bw(
    op: str, count: int, typesize: int, sec: float, nranks: int
) -> tuple[float, float]:
    """(algbw, busbw) in GB/s as nccl-tests computes them for one measured point."""
    return GET_BW[op](count, typesize, sec, nranks)
