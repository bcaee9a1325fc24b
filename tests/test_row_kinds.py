"""Rows made by kind: Row.collective fills a point's and a measurement's fields, and every
kind refuses a field that only another kind has."""

from __future__ import annotations

import pytest

from gpulane.collectives.harness import Summary
from gpulane.collectives.spec import plan_point
from gpulane.record import Row
from gpulane.row_kinds import OWN_FIELDS


@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 8])
def test_collective_row_from_its_point_and_measurement(ranks: int) -> None:
    point = plan_point("all_gather", 1 << 20, "bfloat16", "sum", 0, ranks)
    measured = Summary(12.5, 12.0, 14.0, 83.9, 73.4, 0)
    row = Row.collective("r1", "torch-gloo", point, False, measured, build="b", world_size=ranks)
    assert (row.kind, row.op, row.dtype, row.in_place) == (
        "collective",
        "all_gather",
        "bfloat16",
        False,
    )
    assert (row.redop, row.root) == (point.redop, point.root)
    assert (row.size_bytes, row.count) == (point.size_bytes, point.count)
    assert (row.time_us, row.time_us_p50, row.time_us_p99) == (12.5, 12.0, 14.0)
    assert (row.algbw_gbps, row.busbw_gbps, row.wrong) == (83.9, 73.4, 0)
    assert row == Row.from_dict(row.to_dict())


def test_an_error_row_has_no_point() -> None:
    row = Row.collective("r1", "nccl-tests", op="all_reduce", status="error", error="x")
    assert (row.kind, row.op, row.size_bytes, row.status) == (
        "collective",
        "all_reduce",
        None,
        "error",
    )


@pytest.mark.parametrize("kind", ["collective", "copy", "tokens"])
def test_a_field_of_another_kind_is_refused(kind: str) -> None:
    make = getattr(Row, kind)
    args = {"run_id": "r", "backend": "b", "op": "x"}
    for other, fields in OWN_FIELDS.items():
        for name in sorted(fields):
            if other == kind:
                assert getattr(make(**args, **{name: 1}), name) == 1
            else:
                with pytest.raises(TypeError, match=f"Row.{kind}: {name} is not a {kind} field"):
                    make(**args, **{name: 1})
    with pytest.raises(TypeError, match="kind"):
        make(**args, kind="copy")
    assert make(**args).kind == kind
