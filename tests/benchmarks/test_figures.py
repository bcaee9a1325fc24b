"""benchmarks.check's reading of a README: a figure that agrees passes, and each way a
figure can be wrong (a changed number, a number the README does not print, a file that is
gone, an output that no longer regenerates) fails with a message saying which."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.check import main as check_main
from benchmarks.figures import check_readme, num, shown_number

ROWS = [
    {"op": "decode", "batch": 1, "time_us": 5433.48, "status": "ok"},
    {"op": "decode", "batch": 16, "time_us": 6776.0, "status": "ok"},
    {"op": "prefill", "batch": 1, "time_us": 27525.0, "status": "ok"},
]


def readme(tmp_path: Path, prose: str, block: str) -> Path:
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    path = tmp_path / "README.md"
    path.write_text(f"{prose}\n\n```figures\n{block}\n```\n")
    return path


ONE = """- id: step
  file: run/rows.jsonl
  where: op == "decode" and batch == 1
  value: one.time_us / 1e3
  shown: "5.433 ms"
"""


def problems(path: Path) -> list[str]:
    return [p for f in check_readme(path) for p in f.problems]


def test_a_figure_that_agrees_passes(tmp_path: Path) -> None:
    assert problems(readme(tmp_path, "The step took 5.433 ms.", ONE)) == []


def test_a_changed_number_fails(tmp_path: Path) -> None:
    path = readme(tmp_path, "The step took 5.434 ms.", ONE.replace("5.433", "5.434"))
    assert any("computed 5.43348" in p for p in problems(path))


def test_rounding_is_half_a_unit_of_the_last_printed_digit(tmp_path: Path) -> None:
    ok = ONE.replace('"5.433 ms"', '"5.43 ms"')
    assert problems(readme(tmp_path, "It took 5.43 ms.", ok)) == []
    bad = ONE.replace('"5.433 ms"', '"5.44 ms"')
    assert problems(readme(tmp_path, "It took 5.44 ms.", bad))


def test_a_figure_the_readme_does_not_print_fails(tmp_path: Path) -> None:
    assert any("does not appear" in p for p in problems(readme(tmp_path, "No number.", ONE)))


def test_a_filter_that_keeps_several_rows_fails(tmp_path: Path) -> None:
    block = ONE.replace(" and batch == 1", "")
    assert any("exactly one" in p for p in problems(readme(tmp_path, "5.433 ms", block)))


def test_a_missing_file_fails(tmp_path: Path) -> None:
    block = ONE.replace("run/rows.jsonl", "gone/rows.jsonl")
    assert any("nothing there" in p for p in problems(readme(tmp_path, "5.433 ms", block)))


def test_lists_lines_and_marked_numbers(tmp_path: Path) -> None:
    block = """- id: row
  file: run/rows.jsonl
  value: "[pick(op='decode', batch=1).time_us / 1e3, pick(op='decode', batch=16).time_us / 1e3]"
  shown: ["| 1 | {5.43}", "6.78 |"]
  line: "| decode |"
"""
    prose = "| op | batch | ms |\n| decode | 1 | 5.43 | 16 | 6.78 |\n| prefill | 1 | 27.5 |"
    assert problems(readme(tmp_path, prose, block)) == []
    moved = prose.replace("| decode | 1 | 5.43 | 16 | 6.78 |", "| decode |\n| 1 | 5.43 | 6.78 |")
    assert any("does not appear on the line" in p for p in problems(readme(tmp_path, moved, block)))


def test_regenerated_output_must_match(tmp_path: Path) -> None:
    script = tmp_path / "make.py"
    script.write_text("print('a table')\n")
    (tmp_path / "out.md").write_text("a table\n")
    block = f"- id: regen\n  run: {sys.executable} {script}\n  output: out.md\n"
    assert problems(readme(tmp_path, "text", block)) == []
    (tmp_path / "out.md").write_text("an old table\n")
    assert any("differs" in p for p in problems(readme(tmp_path, "text", block)))


def test_unknown_keys_and_duplicate_ids_fail(tmp_path: Path) -> None:
    block = ONE + ONE.replace("  value:", "  valeu:")
    got = problems(readme(tmp_path, "5.433 ms", block))
    assert any("id used twice" in p for p in got) and any("unknown keys valeu" in p for p in got)


@pytest.mark.parametrize(
    ("shown", "number", "tol"),
    [
        ("5.433 ms", 5.433, 0.0005),
        ("16.06e9", 16.06e9, 0.005e9),
        ("+25 %", 25, 0.5),
        ("−3.1 %", -3.1, 0.05),
        ("0.82-0.87", 0.82, 0.005),
        ("NV18 {478.1}", 478.1, 0.05),
        ("1,234 tok/s", 1234, 0.5),
    ],
)
def test_shown_number(shown: str, number: float, tol: float) -> None:
    got, half = shown_number(shown)
    assert got == pytest.approx(number) and half == pytest.approx(tol)


def test_num_reads_table_cells() -> None:
    assert [num(x) for x in ("1,234", "+4%", "−0.5", "**24**", "-", "2.3×")] == [
        1234,
        4,
        -0.5,
        24,
        "-",
        2.3,
    ]


def test_cli_fails_on_a_wrong_readme(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = readme(tmp_path, "The step took 5.434 ms.", ONE.replace("5.433", "5.434"))
    assert check_main([str(path)]) == 1
    assert "1 failed" in capsys.readouterr().out
