"""gpulane.collectives.spec against what nccl-tests printed on real machines.

For every table line of the nccl-tests fixtures (tests/fixtures/h200x2, the 2x H200 machine;
tests/fixtures/public/nccl-tests, see SOURCES.md): the count nccl-tests printed is the one
spec.plan gives for the printed size, and algbw/busbw recomputed from the printed size and
time with spec.bandwidth match the printed columns to their precision. "To their precision"
is exact interval arithmetic: the true time lies within half a unit of the printed time's
last digit, and the printed bandwidth is that interval's bandwidth rounded to its own digits.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from gpulane.collectives.nccl_tests.logs import parse_log
from gpulane.collectives.spec import COLLECTIVES, DTYPES, plan_point
from tests.conftest import FIXTURES

FILES = sorted((FIXTURES / "h200x2").glob("nccl-tests-*")) + sorted(
    (FIXTURES / "public" / "nccl-tests").glob("*.txt")
)

# World sizes the logs do not print (partial device lists), from SOURCES.md.
KNOWN_WORLD = {
    "coreweave_gb200_20racks_1440ranks_all_reduce_FRAGMENT.txt": 1440,
    # "2-nodes(16 GPUs)" per its source (msccl issue #48); the excerpt has no device list
    "msccl48_16xA100_alltoall_OLDFMT_blank_redop_EXCERPT.txt": 16,
    # nccl-tests#78's alltoall: 268435456 B of floats printed as count 1048576 a peer
    # (67108864 elements / 64); the file name's 64x V100 from its source
    "nccltests78_64xV100_alltoall_OLDFMT_blank_redop_footer_TABLE.txt": 64,
}
# The ELIDED log ("64x H100" per its source) carries neither a device list nor numbers that
# fit 64 ranks (busbw/algbw = 1.979, i.e. 2(n-1)/n with n near 96): nothing to check against.
NO_WORLD = {"coreweave_h100_64gpu_sharp_mpijob_ELIDED.txt"}


def _half_unit(token: str) -> float:
    """Half a unit of the last printed digit: '19.12' -> 0.005, '154383' -> 0.5."""
    exponent = Decimal(token).as_tuple().exponent
    assert isinstance(exponent, int)
    return 0.5 * 10.0**exponent


def _bw_interval(size: int, time_tok: str, factor: float) -> tuple[float, float]:
    t = float(time_tok)
    h = _half_unit(time_tok)
    lo_t, hi_t = t - h, t + h
    hi = float("inf") if lo_t <= 0 else size / 1e3 / lo_t * factor
    return size / 1e3 / hi_t * factor, hi


def _matches(printed: str, interval: tuple[float, float]) -> bool:
    b, h = float(printed), _half_unit(printed)
    lo, hi = interval
    return lo - 1e-12 <= b + h and b - h <= hi + 1e-12


def _cases() -> list[tuple[Path, int]]:
    out = []
    for path in FILES:
        if path.name in NO_WORLD:
            continue
        runs = parse_log(path.read_text(), str(path))
        out += [(path, k) for k in range(len(runs))]
    return out


@pytest.mark.parametrize(("path", "index"), _cases(), ids=lambda v: getattr(v, "name", str(v)))
def test_counts_and_bandwidth_from_spec(path: Path, index: int) -> None:
    run = parse_log(path.read_text(), str(path))[index]
    assert run.op in COLLECTIVES, f"{path.name}: unknown collective"
    spec = COLLECTIVES[run.op]
    n = run.world_size or KNOWN_WORLD[path.name]
    old_format = run.columns is not None and "error" in run.columns.groups[0]
    checked = 0
    for line in run.lines:
        assert line.dtype in DTYPES
        for m in line.results:
            time_tok = m.text.get("time") or repr(m.time_us)
            alg_tok = m.text.get("algbw") or repr(m.algbw_gbps)
            bus_tok = m.text.get("busbw") or repr(m.busbw_gbps)
            if path.suffix == ".json":
                # -J writes doubles with %lf: six decimals.
                time_tok, alg_tok, bus_tok = (
                    f"{float(x):.6f}" for x in (time_tok, alg_tok, bus_tok)
                )
            if line.size_bytes == 0:
                assert float(alg_tok) == float(bus_tok) == 0
                continue
            factor = spec.bus_factor(n)
            if old_format and run.op in ("all_gather", "reduce_scatter"):
                # nccl-tests before 2.x counted (n-1)/n of the buffer as algbw, so algbw
                # equals busbw there; busbw is the same rule as today.
                assert alg_tok == bus_tok
            else:
                assert _matches(alg_tok, _bw_interval(line.size_bytes, time_tok, 1.0)), (
                    f"{path.name}:{line.line} algbw {alg_tok} for {line.size_bytes} B in "
                    f"{time_tok} us"
                )
            assert _matches(bus_tok, _bw_interval(line.size_bytes, time_tok, factor)), (
                f"{path.name}:{line.line} busbw {bus_tok} for {line.size_bytes} B in "
                f"{time_tok} us, {n} ranks"
            )
            # spec.bandwidth agrees with the interval's midpoint formula.
            alg, bus = spec.bandwidth(line.size_bytes, float(time_tok) * 1e-6, n)
            assert bus == pytest.approx(alg * factor)
            checked += 1
        # The printed count is spec's count for the printed size (the request nccl-tests
        # turned into it is size rounded down to what the collective can split evenly).
        # Old nccl-tests did not keep each rank's share a multiple of 16 bytes.
        if line.count is not None and line.size_bytes > 0 and not old_format:
            point = plan_point(run.op, line.size_bytes, line.dtype, "sum", 0, n)
            assert point.size_bytes == line.size_bytes, f"{path.name}:{line.line}"
            assert point.count == line.count, f"{path.name}:{line.line}"
    assert checked > 0
