"""Rule no_foreign: a GPU another process used while it was measured fails, by name."""

from __future__ import annotations

import pytest

from gpulane.analysis.rules import FAIL, PASS, SKIP, evaluate
from gpulane.analysis.store import frame_from_rows
from gpulane.record import Row

RULES = {"checks": {"no_foreign_work": {"check": "no_foreign"}}}
WORDS = "GPU2 runs pid 1967 (python3, 100 %, 1.9 GiB)"


def rows(gpus: int, busy: dict[str, str] | None, backend: str = "torch-nccl") -> list[Row]:
    extra = {"foreign": busy} if busy is not None else {}
    return [
        Row.from_dict(
            {
                "run_id": "r",
                "kind": "collective",
                "backend": backend,
                "op": "all_reduce",
                "host": "vm",
                "world_size": gpus,
                "size_bytes": 1 << 30,
                "busbw_gbps": 300.0,
                "status": "ok",
                "extra": extra,
            }
        )
    ]


def lines(frame_rows: list[Row]):
    v = evaluate(frame_from_rows(frame_rows), RULES, None, None)
    return [(c.status, c.subject, c.message) for c in v.checks if c.rule == "no_foreign_work"]


@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 8])
def test_quiet_gpus_pass(gpus: int) -> None:
    assert [s for s, _, _ in lines(rows(gpus, {}))] == [PASS]


@pytest.mark.parametrize("gpus", [3, 4, 8])
def test_each_busy_gpu_fails_with_its_process(gpus: int) -> None:
    busy = {"GPU2": WORDS, "GPU0": "GPU0 runs pid 7 (x, 5 %, 0.1 GiB)"}
    got = lines(rows(gpus, busy))
    assert {s for s, _, _ in got} == {FAIL}
    assert ("fail", "vm:GPU2", f"measured while another process used the GPU: {WORDS}") in got
    assert len(got) == len(busy)


def test_mixed_machines_name_the_host() -> None:
    a = rows(4, {"GPU2": WORDS})
    b = rows(8, {})
    b[0].host = "other"
    got = lines(a + b)
    assert [(s, subj) for s, subj, _ in got] == [(FAIL, "vm:GPU2")]


def test_rows_that_never_read_the_gpus_do_not_pass() -> None:
    # CPU rows, or GPU rows from before the reading existed: a check that did not run
    assert [s for s, _, _ in lines(rows(2, None, backend="torch-gloo"))] == [SKIP]
    assert [s for s, _, _ in lines(rows(4, None))] == [SKIP]
