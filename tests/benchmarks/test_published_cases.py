"""run_cases.py's published PCIe cases: the committed rows follow the cases, and the
reference figure a case takes is the one of its GPU, count and link. (That the rows are
what run_cases.py makes today is `python -m benchmarks.check`'s: its figures block runs
it again, 1.5-3 min on a 2-core VM, so it is not run a second time here.)"""

from __future__ import annotations

import json

from benchmarks.advise.published import run_cases

ROWS = [
    json.loads(x) for x in (run_cases.HERE / "cases.jsonl").read_text().splitlines() if x.strip()
]


def test_one_row_per_case_in_order() -> None:
    assert [r["case"] for r in ROWS] == [c["case"] for c in run_cases.CASES]


def test_rows_follow_the_cases() -> None:
    for row, case in zip(ROWS, run_cases.CASES, strict=True):
        names = [arm["name"] for arm in case["arms"]]
        pa, pb = case["published"]
        assert row["published_winner"] == (names[0] if pa >= pb else names[1])
        assert row["published_ratio"] == round(pa / pb, 3)
        agrees = row["advisor_pick"] == row["published_winner"]
        if case["deciding_input"]:  # the advisor cannot know it: it names it
            assert row["agrees"] == f"depends: {case['deciding_input']}"
        elif agrees:
            assert row["agrees"] == "yes"
        elif row["advisor_margin_within_error"]:  # a miss inside its basis' error
            assert row["agrees"].startswith("too close to call")
        else:
            assert row["agrees"] == "no"


def test_a_reference_all_reduce_is_taken_only_for_its_gpu_count_and_link() -> None:
    pro = run_cases.reference_allreduce("RTX PRO 6000", "PCIe Gen5 x16", 8)
    assert pro is not None and (pro["low"], pro["high"]) == (37.6, 41.1)  # the 1-2 GiB sweep
    assert run_cases.reference_allreduce("RTX PRO 6000", "PCIe Gen5 x16", 2) is None
    assert run_cases.reference_allreduce("L4", "PCIe Gen4 x16", 8) is None
    for row, case in zip(ROWS, run_cases.CASES, strict=True):
        taken = row["collectives"].startswith("reference ")
        assert taken == (case["gpu"] == "RTX PRO 6000" and case["gpus"] == 8), row["case"]
