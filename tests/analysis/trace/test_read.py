"""One trace file, whatever it holds (gpulane.analysis.trace.read): the reader chosen by
content, bad files named in one line, and damaged files read without a traceback."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.analysis.trace.chrome import parse_chrome_bytes
from gpulane.analysis.trace.read import read_trace
from gpulane.analysis.trace.summary import summarize
from gpulane.errors import GpulaneError, InputError, ParseError
from tests.analysis.trace.traces import make_nsys_sqlite
from tests.conftest import fixture_path

TRACES = ("traces/h200/bad.json.gz", "traces/h200/good.json.gz", "traces/cpu/copies.json.gz")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "no trace data"),
        (b"hello, world", "not a Chrome trace"),
        (b'{"foo": 1}', "traceEvents"),
        (b"\x00\x01\x02garbage", "not a Chrome trace"),
        (b"42", "neither an object nor an array"),
    ],
)
def test_not_a_trace(tmp_path: Path, content: bytes, words: str) -> None:
    p = tmp_path / "x.json"
    p.write_bytes(content)
    with pytest.raises(ParseError) as err:
        read_trace(p)
    assert words in str(err.value) and str(p) in str(err.value)


def test_missing_and_nsys_rep(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_trace(tmp_path / "nope.json")
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"x")
    with pytest.raises(InputError, match="nsys export --type sqlite"):
        read_trace(rep)


def test_reader_chosen_by_content_not_name(tmp_path: Path) -> None:
    sqlite = tmp_path / "profile.json"
    make_nsys_sqlite(sqlite)
    assert read_trace(sqlite).info.format == "nsys-sqlite"
    chrome = tmp_path / "profile.sqlite"
    chrome.write_bytes(fixture_path("traces/h200/bad.json.gz").read_bytes())
    assert read_trace(chrome).info.format == "torch-chrome"


# Hypothesis: any cut or byte damage of a real trace reads or fails with ParseError.
_TEXT = gzip.decompress(fixture_path("traces/h200/good.json.gz").read_bytes())
_GZ = fixture_path("traces/h200/bad.json.gz").read_bytes()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cut=st.integers(min_value=0, max_value=len(_TEXT)),
    flips=st.lists(
        st.tuples(st.integers(min_value=0, max_value=len(_TEXT) - 1), st.integers(0, 255)),
        max_size=6,
    ),
    gz=st.booleans(),
)
def test_fuzz_mutations_never_crash(cut: int, flips: list[tuple[int, int]], gz: bool) -> None:
    data = bytearray(_GZ[: max(cut % len(_GZ), 1)]) if gz else bytearray(_TEXT[:cut])
    for pos, value in flips:
        if data:
            data[pos % len(data)] = value
    try:
        t = parse_chrome_bytes(bytes(data), "fuzz")
    except GpulaneError:
        return
    s = summarize(t)
    assert s.copies == len(t.copies)
    for c in t.copies:
        assert c.dur_us >= 0
