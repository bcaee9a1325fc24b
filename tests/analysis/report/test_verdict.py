"""The compare page's verdict and ratio table state the noise beside every ratio: two runs
of the same hardware read "within noise", a real drop does not."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpulane.analysis.compare import compare, summary_display
from gpulane.analysis.compare.render import noise_text
from gpulane.analysis.report.verdict import line_one
from gpulane.analysis.store import load_frame
from gpulane.record import Row
from tests.analysis.fixture_rows import nccl_rows, write_run

ALL_REDUCE = "h200x2/nccl-tests-all_reduce.txt"


def _scaled(rows: list[Row], build: str, run_id: str, factor_of: dict[int, float]) -> list[Row]:
    """The rows again as another build's run, each busbw times the factor of its size's
    index (time divided by it), as a second run of the same or of a slower machine."""
    out = []
    sizes = sorted({int(r.size_bytes or 0) for r in rows})
    for r in rows:
        f = factor_of.get(sizes.index(int(r.size_bytes or 0)), 1.0)
        out.append(
            dataclasses.replace(
                r,
                build=build,
                run_id=run_id,
                busbw_gbps=None if r.busbw_gbps is None else r.busbw_gbps * f,
                algbw_gbps=None if r.algbw_gbps is None else r.algbw_gbps * f,
                time_us=None if r.time_us is None else r.time_us / f,
            )
        )
    return out


def _cmp(tmp_path: Path, factor_of: dict[int, float]) -> object:
    base = nccl_rows(ALL_REDUCE, build="a", run_id="run-a")
    write_run(tmp_path, base)
    write_run(tmp_path, _scaled(base, "b", "run-b", factor_of))
    frame = load_frame([tmp_path])
    return compare([(b, frame[frame["build"] == b]) for b in ("a", "b")])


def test_the_same_machine_twice_reads_within_noise(tmp_path: Path) -> None:
    # a second run scattering by +-4 % from size to size, 1 % slower on the whole
    jitter = {i: (0.95 if i % 2 else 1.03) for i in range(40)}
    cmp = _cmp(tmp_path, jitter)
    text = line_one(cmp)  # type: ignore[arg-type]
    assert "within noise" in text and "over" in text and "sizes" in text
    table = summary_display(cmp)  # type: ignore[arg-type]
    noise = table.loc[table["metric"] == "busbw_gbps", "b noise"].iloc[0]
    assert noise.startswith("±") and noise.endswith("within noise")


def test_a_halved_link_is_not_noise(tmp_path: Path) -> None:
    jitter = {i: (0.49 if i % 2 else 0.51) for i in range(40)}
    cmp = _cmp(tmp_path, jitter)
    text = line_one(cmp)  # type: ignore[arg-type]
    assert "0.5×" in text and "within noise" not in text and "±" in text


def test_noise_needs_three_ratios() -> None:
    assert noise_text(0.9, None) == "-"
    assert noise_text(0.98, 0.05) == "±5 %, within noise"
    assert noise_text(0.5, 0.02) == "±2 %"
    assert noise_text(float("nan"), 0.02) == "-"
