"""nccl-tests' size rules and bus-bandwidth factors, collective by collective.

Expected values are nccl-tests' own formulas (src/<coll>.cu GetCollByteCount/GetBw),
worked by hand for 2 and 8 ranks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

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
def test_bad_names_are_input_errors(call, message: str) -> None:
    with pytest.raises(InputError, match=message):
        call()


def test_aliases() -> None:
    assert collective("allreduce").name == "all_reduce"
    assert collective("all_gather_perf").name == "all_gather"
    assert dtype("bf16").name == "bfloat16"
    assert dtype("fp32").name == "float"


# -- the rest of the spec's promises (each written from nccl-tests, not from the spec) -----
@pytest.mark.parametrize(
    ("op", "send_off", "recv_off"),
    # nccl-tests' GetCollByteCount: where the send data sits inside recvbuff in place
    [
        ("all_reduce", 0, 0),
        ("broadcast", 0, 0),
        ("reduce", 0, 0),
        ("sendrecv", 0, 0),
        ("alltoall", 0, 0),
        ("all_gather", 256, 0),
        ("gather", 256, 0),
        ("reduce_scatter", 0, 256),
        ("scatter", 0, 256),
    ],
)
def test_in_place_offsets(op: str, send_off: int, recv_off: int) -> None:
    p = plan_point(op, 4 * 256 * 4, "float", "sum", 0, 4)  # 4 ranks, 256 floats each
    c = p.counts
    assert (c.send_inplace_offset, c.recv_inplace_offset) == (send_off, recv_off)
    # one buffer holds a rank's send and receive data in place: the larger of the two
    for rank in range(4):
        assert p.buffer_elements(rank) == max(c.send, c.recv)


def test_bandwidth_of_no_time_is_zero() -> None:
    spec = collective("all_reduce")
    assert spec.bandwidth(1 << 20, 0.0, 2) == (0.0, 0.0)
    assert spec.bandwidth(1 << 20, -1.0, 2) == (0.0, 0.0)
    alg, bus = spec.bandwidth(1 << 30, 0.5, 4)
    assert (alg, bus) == (pytest.approx(2 * (1 << 30) / 1e9), pytest.approx(1.5 * alg))


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("all-reduce", "all_reduce"),
        ("Reduce-Scatter", "reduce_scatter"),
        (" all_gather_perf ", "all_gather"),
        ("alltoall_single", "alltoall"),
        ("bcast", "broadcast"),
        ("send_recv", "sendrecv"),
    ],
)
def test_collective_names(name: str, op: str) -> None:
    assert collective(name).name == op


def test_unknown_names_list_the_choices() -> None:
    with pytest.raises(InputError) as err:
        collective("allsum")
    assert str(err.value) == (
        "collective: unknown collective 'allsum'; choose from all_reduce, all_gather, "
        "reduce_scatter, alltoall, broadcast, reduce, sendrecv, gather, scatter"
    )
    with pytest.raises(InputError) as err:
        dtype("complex")
    assert str(err.value) == (
        "dtype: unknown type 'complex'; choose one of int8, uint8, int32, uint32, int64, "
        "uint64, half, float, double, bfloat16"
    )
    with pytest.raises(InputError) as err:
        redop("mean")
    assert (
        str(err.value) == "redop: unknown reduction 'mean'; choose one of sum, prod, max, min, avg"
    )
    with pytest.raises(InputError) as err:
        plan_point("broadcast", 1024, "float", "sum", 4, 4)
    assert str(err.value) == "root: 4 is not a rank of a 4-rank run (0..3)"


def test_point_keeps_what_was_asked() -> None:
    p = plan_point("all_gather", 1000, "float", "sum", 3, 4)
    assert p.requested_bytes == 1000
    assert (p.redop, p.root) == ("none", -1)  # no redop, no root: as nccl-tests prints
    assert p.size_bytes == 4 * 60 * 4  # 250 floats -> 62 per rank -> 60 (16-byte shares)


@pytest.mark.parametrize(
    ("ask", "given", "meant"),
    [
        (dtype, "flaot", "float"),
        (dtype, "BFLOAT61", "bfloat16"),
        (collective, "al_gather", "all_gather"),
        (collective, "reduce-scater", "reduce_scatter"),
    ],
)
def test_a_typo_is_answered_with_the_name_meant(ask: Any, given: str, meant: str) -> None:
    with pytest.raises(InputError) as err:
        ask(given)
    assert f"{given!r}; did you mean {meant!r}?; choose " in str(err.value)
