"""nccl-tests' size rules and bus-bandwidth factors, collective by collective.

Expected values are nccl-tests' own formulas (src/<coll>.cu GetCollByteCount/GetBw),
worked by hand for 2 and 8 ranks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import pytest

from gpulane.collectives.spec import (
    COLLECTIVES,
    CollectiveSpec,
    collective,
    dtype,
    plan_point,
    redop,
)
from gpulane.errors import InputError
from tests.collectives.nccl_tests_formulas import GET_BW, nccl_tests_bw


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 1.75),
        ("all_gather", 2, 0.5),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 8, 0.875),
        ("alltoall", 4, 0.75),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("sendrecv", 8, 1.0),
        ("gather", 8, 0.875),
        ("scatter", 4, 0.75),
    ],
)
def test_bus_factor(op: str, n: int, factor: float) -> None:
    alg, bus = collective(op).bandwidth(1_000_000_000, 1.0, n)
    assert alg == pytest.approx(1.0)
    assert bus == pytest.approx(factor)


def bandwidth_mismatches(specs: Mapping[str, CollectiveSpec]) -> list[str]:
    """Where ``specs`` give another (algbw, busbw) than nccl-tests' GetBw, at 2..9 ranks."""
    bad = []
    for op in sorted(set(specs) | set(GET_BW)):
        if op not in specs or op not in GET_BW:
            bad.append(f"{op}: in only one of spec and nccl-tests")
            continue
        spec = specs[op]
        for n in range(2, 10):
            for dt in (dtype("float"), dtype("int8"), dtype("double")):
                counts = spec.plan(1 << 20, dt, n)
                got = spec.bandwidth(spec.printed_size(counts, dt), 1e-3, n)
                want = nccl_tests_bw(op, counts.param, dt.itemsize, 1e-3, n)
                if not all(
                    math.isclose(g, w, rel_tol=1e-12) for g, w in zip(got, want, strict=True)
                ):
                    bad.append(f"{op} {dt.name} at {n} ranks: {got} != nccl-tests' {want}")
    return bad


def test_bandwidths_are_nccl_tests_own_for_all_nine() -> None:
    assert set(GET_BW) == set(COLLECTIVES) and len(COLLECTIVES) == 9
    assert bandwidth_mismatches(COLLECTIVES) == []


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_a_planted_factor_of_one_is_caught(op: str) -> None:
    planted = {**COLLECTIVES, op: replace(COLLECTIVES[op], bus_factor=lambda n: 1.0)}
    bad = bandwidth_mismatches(planted)
    assert bad and all(line.startswith(f"{op} ") for line in bad)


def test_every_collective_has_a_rule() -> None:
    assert set(COLLECTIVES) >= {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "alltoall",
        "broadcast",
        "reduce",
        "sendrecv",
    }


@pytest.mark.parametrize(
    ("op", "size", "dt", "n", "printed", "count"),
    [
        # all_gather at 2 ranks, float: each rank's share rounds down to 16 bytes
        ("all_gather", 8, "float", 2, 0, 0),
        ("all_gather", 16, "float", 2, 0, 0),
        ("all_gather", 32, "float", 2, 32, 4),
        ("all_gather", 1 << 20, "float", 2, 1 << 20, 131072),
        # 8 ranks: 1000 floats -> 125 per rank -> 124 (multiple of 4) -> 992 floats
        ("all_gather", 4000, "float", 8, 3968, 124),
        ("reduce_scatter", 4000, "float", 8, 3968, 124),
        ("alltoall", 4000, "float", 8, 3968, 124),
        # int8 shares are multiples of 16 elements, double of 2
        ("all_gather", 100, "int8", 2, 96, 48),
        ("all_gather", 100, "double", 2, 96, 6),
        # whole-buffer collectives keep the size (rounded down to whole elements)
        ("all_reduce", 8, "float", 2, 8, 2),
        ("all_reduce", 10, "float", 2, 8, 2),
        ("broadcast", 1 << 30, "bfloat16", 8, 1 << 30, 1 << 29),
        ("sendrecv", 64, "half", 2, 64, 32),
    ],
)
def test_size_rules(op: str, size: int, dt: str, n: int, printed: int, count: int) -> None:
    p = plan_point(op, size, dt, "sum", 0, n)
    assert p.size_bytes == printed
    assert p.count == count


def test_in_place_offsets_follow_nccl_tests() -> None:
    ag = plan_point("all_gather", 1024, "float", "sum", 0, 4)
    # all_gather: send sits at rank*count inside recvbuff
    assert (ag.counts.send, ag.counts.recv) == (64, 256)
    assert (ag.counts.send_inplace_offset, ag.counts.recv_inplace_offset) == (64, 0)
    rs = plan_point("reduce_scatter", 1024, "float", "sum", 0, 4)
    assert (rs.counts.send, rs.counts.recv) == (256, 64)
    assert (rs.counts.send_inplace_offset, rs.counts.recv_inplace_offset) == (0, 64)
    assert rs.buffer_elements(3) == 256


def test_redop_and_root_normalised_as_nccl_tests_prints() -> None:
    assert plan_point("all_gather", 64, "float", "max", 1, 2).redop == "none"
    assert plan_point("all_gather", 64, "float", "sum", 1, 2).root == -1
    assert plan_point("broadcast", 64, "float", "sum", 1, 2).root == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: collective("allreduce_x"), "unknown collective"),
        (lambda: dtype("float128"), "unknown type"),
        (lambda: redop("mean"), "unknown reduction"),
        (lambda: plan_point("broadcast", 64, "float", "sum", 2, 2), "root: 2"),
    ],
)
def test_bad_names_are_input_errors(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=message):
        call()


def test_aliases() -> None:
    assert collective("allreduce").name == "all_reduce"
    assert collective("all_gather_perf").name == "all_gather"
    assert dtype("bf16").name == "bfloat16"
    assert dtype("fp32").name == "float"
