"""run_cases.py on its published PCIe cases: the committed rows and table are what it makes."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.advise.published import run_cases

HERE = Path(run_cases.__file__).resolve().parent


def test_rerun_matches_committed(tmp_path: Path) -> None:
    assert run_cases.main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "cases.md").read_text() == (HERE / "cases.md").read_text()
    rows = [json.loads(x) for x in (tmp_path / "cases.jsonl").read_text().splitlines()]
    committed = [json.loads(x) for x in (HERE / "cases.jsonl").read_text().splitlines()]
    assert rows == committed
    assert len(rows) == len(run_cases.CASES)


def test_rows_follow_the_cases(tmp_path: Path) -> None:
    run_cases.main(["--out", str(tmp_path)])
    rows = [json.loads(x) for x in (tmp_path / "cases.jsonl").read_text().splitlines()]
    for row, case in zip(rows, run_cases.CASES, strict=True):
        if case["deciding_input"]:
            assert row["agrees"] == "undecidable" and row["deciding_input"]
        elif row["predicted_ratio"] is not None:
            assert row["agrees"] == (
                "yes" if row["advisor_pick"] == case["published_winner"] else "no"
            )
            # pick and ratio say the same thing: ratio > 1 means the first split is faster
            first = run_cases.name(*case["splits"][0])
            assert (row["predicted_ratio"] >= 1) == (row["advisor_pick"] == first)
    # the L4 case is scored: its published ratio is the page's 307.61 / 261.16 output tok/s
    assert rows[0]["published_ratio"] == round(307.61 / 261.16, 3)
    assert rows[0]["agrees"] in ("yes", "no")
