"""Every importer gpulane parse owns (bandwidthtest, p2p, nvbandwidth, vllm), fed real
captured files cut at random byte offsets, as UTF-8 and re-encoded as UTF-16:

- no row holds a number that is not in the uncut file (a figure as printed, or one of the
  documented conversions of a printed figure: MB/s to GB/s, half a bidirectional sum,
  ns/ms/s to µs, bandwidthTest's time from its size and bandwidth);
- every cut that loses a number is reported, by an error row or a ParseError;
- every row is strict JSON.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.errors import InputError, ParseError
from gpulane.inference import vllm_import
from gpulane.record import Row
from gpulane.transfers.importers import bandwidthtest, nvbandwidth, p2p
from gpulane.transfers.importers.common import MIB_PER_S_IN_GBPS
from tests.conftest import FIXTURES

IMPORTERS: dict[str, ModuleType] = {
    "bandwidthtest": bandwidthtest,
    "p2p": p2p,
    "nvbandwidth": nvbandwidth,
    "vllm": vllm_import,
}
# The layout `vllm bench latency --output-json` writes (json.dump(results, f, indent=4)).
BENCH_LATENCY_JSON = json.dumps(
    {
        "avg_latency": 1.2532,
        "latencies": [1.2101, 1.2503, 1.3012],
        "percentiles": {
            "10": 1.2101,
            "25": 1.2288,
            "50": 1.2503,
            "75": 1.279,
            "90": 1.2901,
            "99": 1.3012,
        },
    },
    indent=4,
)


def _cases() -> list[tuple[str, str, str]]:
    """(format, name, text) of every real capture each importer reads."""
    out = []
    for path in sorted((FIXTURES / "public" / "bandwidthtest").iterdir()):
        name = path.name
        fmt = (
            "nvbandwidth" if "nvbandwidth" in name else "p2p" if "p2p" in name else "bandwidthtest"
        )
        out.append((fmt, name, path.read_text()))
    for path in sorted((FIXTURES / "public" / "vllm").iterdir()):
        if "Error" not in path.name:  # the failed-start log is no result at any length
            out.append(("vllm", path.name, path.read_text()))
    out.append(("vllm", "bench_latency.json", BENCH_LATENCY_JSON + "\n"))
    return out


CASES = _cases()
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_FACTORS = (1.0, 0.5, MIB_PER_S_IN_GBPS, 1e3, 1e6, 1e-3)
_MEASURED = (
    "size_bytes", "count", "iters", "time_us", "time_us_p50", "time_us_p99", "algbw_gbps",
    "busbw_gbps", "tokens_per_s", "ttft_ms", "itl_ms_p50", "itl_ms_p99", "batch",
)  # fmt: skip
_NOT_FIGURES = {"line", "row", "col", "devices"}  # where in the file, not what it measured


def _key(value: float) -> str:
    return f"{value:.9g}"


def _allowed(text: str) -> set[str]:
    numbers = {float(m.group()) for m in _NUMBER.finditer(text)}
    return {_key(n * f) for n in numbers for f in _FACTORS}


def _last_number_end(text: str) -> int:
    return max(m.end() for m in _NUMBER.finditer(text))


def _figures(row: Row) -> list[tuple[str, float]]:
    out = [(name, getattr(row, name)) for name in _MEASURED]

    def walk(value: object, name: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in _NOT_FIGURES:
                    walk(v, f"{name}.{k}")
        elif isinstance(value, list):
            for v in value:
                walk(v, name)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append((name, value))

    walk(row.extra, "extra")
    return [(n, float(v)) for n, v in out if v is not None]


def _check_numbers(rows: list[Row], allowed: set[str], where: str) -> None:
    for row in rows:
        json.dumps(row.to_dict(), allow_nan=False)  # strict JSON
        for name, value in _figures(row):
            assert math.isfinite(value), (where, name, value)
            if name == "iters" and row.backend == "vllm" and row.op == "latency":
                assert value == len(row.extra["latencies_s"])  # how many it lists
                continue
            if name == "time_us" and row.backend == "bandwidthTest":
                assert row.size_bytes and row.algbw_gbps
                assert value == pytest.approx(row.size_bytes / (row.algbw_gbps * 1e9) * 1e6)
                continue
            assert _key(value) in allowed, f"{where}: {name}={value} is not in the file"


def _between_testcases(fmt: str, prefix: str) -> bool:
    """An nvbandwidth cut right after a testcase's SUM line: nothing in the file says
    another testcase was due (the importer's documented blind spot)."""
    if fmt != "nvbandwidth":
        return False
    complete, partial = prefix[: prefix.rfind("\n") + 1], prefix[prefix.rfind("\n") + 1 :]
    last = [line for line in complete.splitlines() if line.strip()][-1:]
    return not partial.strip() and bool(last) and last[0].startswith("SUM ")


def _parse(fmt: str, path: Path) -> list[Row]:
    return list(IMPORTERS[fmt].stream_rows(str(path), run_id="cut", build=None))


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    case=st.sampled_from(CASES),
    where=st.floats(0, 1),
    encoding=st.sampled_from(["utf-8", "utf-16", "utf-16-le"]),
)
def test_files_cut_at_random_bytes(
    tmp_path: Path, case: tuple[str, str, str], where: float, encoding: str
) -> None:
    fmt, name, text = case
    data = text.encode(encoding)
    cut = int(len(data) * where)
    path = tmp_path / f"cut-{name}"
    path.write_bytes(data[:cut])
    # the characters kept (UTF-16: two bytes each, after the byte-order mark)
    bom = 2 if encoding == "utf-16" else 0
    kept = len(data[:cut].decode("utf-8", errors="ignore")) if encoding == "utf-8" else (
        max(cut - bom, 0) // 2
    )  # fmt: skip
    where_ = f"{name} cut at byte {cut} of {len(data)} ({encoding})"
    try:
        rows = _parse(fmt, path)
    except ParseError as err:
        assert err.source == str(path)
        return
    _check_numbers(rows, _allowed(text), where_)
    if kept < _last_number_end(text) and not _between_testcases(fmt, text[:kept]):
        assert any(r.status == "error" for r in rows), f"{where_}: the cut is not reported"


@pytest.mark.parametrize(("fmt", "name", "text"), CASES, ids=[c[1] for c in CASES])
def test_uncut_files_report_nothing(tmp_path: Path, fmt: str, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    rows = _parse(fmt, path)
    _check_numbers(rows, _allowed(text), name)
    if any(tag in name for tag in ENDS_IN_AN_ERROR):
        # partial in the source itself, or a run that stopped on a failure it printed: the
        # rows before it, and one error row at the end (SOURCES.md's naming)
        assert [r.status for r in rows[:-1]] == ["ok"] * (len(rows) - 1), name
        assert rows[-1].status == "error" and rows[-1].error, name
        return
    assert rows and all(r.status == "ok" for r in rows)


# file names that say the file is partial in its source (tests/fixtures/public/SOURCES.md)
# or that the tool stopped on a failure of its own (nvbandwidth's ASSERT, a CUDA error, a
# crash), as the fixtures of issue 43's real-file classes are named
ENDS_IN_AN_ERROR = ("FRAGMENT", "ELIDED", "MANGLED", "ASSERT", "Aborted", "CUDA_ERROR")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    case=st.sampled_from(CASES),
    at=st.floats(0, 1),
    junk=st.text(alphabet=" 0123456789.-NA/\t\nxD\\:=", max_size=12),
)
def test_damaged_files_fail_only_with_one_clear_error(
    tmp_path: Path, case: tuple[str, str, str], at: float, junk: str
) -> None:
    fmt, name, text = case
    pos = int(len(text) * at)
    path = tmp_path / f"junk-{name}"
    path.write_text(text[:pos] + junk + text[pos:])
    try:
        rows = _parse(fmt, path)
    except (ParseError, InputError):
        return
    for row in rows:
        json.dumps(row.to_dict(), allow_nan=False)
        assert row.status == "ok" or row.error
