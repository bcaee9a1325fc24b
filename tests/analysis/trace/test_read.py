"""One trace file, whatever it holds (gpulane.analysis.trace.read): the reader chosen by
content, bad files named in one line, and damaged files read for what they really say.

The property tests cut the captured traces of tests/fixtures/traces (and an Nsight
Systems export) at random byte offsets, plain and gzipped, as issue 19 asks of every
importer: a cut file gives one clear error, or a trace that says it was cut and holds
only copies and kernels that the whole file has, number for number.
"""

from __future__ import annotations

import functools
import gzip
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.analysis.trace.aten import CPU_COPY_OPS, copy_bytes
from gpulane.analysis.trace.chrome import parse_chrome_bytes
from gpulane.analysis.trace.chrome_host import host_copies
from gpulane.analysis.trace.chrome_json import parse_chrome_json
from gpulane.analysis.trace.events import ReadInfo, Trace
from gpulane.analysis.trace.read import read_trace
from gpulane.analysis.trace.rows import trace_rows
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
        (b'{"schemaVersion": 1, "deviceProp', "cut off before its event list"),
        (b"SQLite format 3\x00\x10\x00", "cut off inside its 100-byte header"),
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


# --------------------------------------------------------------------------------------
# Cut at a random byte: one clear error, or a trace that says so and holds only the
# whole file's numbers


@dataclass(frozen=True)
class Whole:
    """What the whole file says, for checking what a cut of it may say."""

    raw: bytes  # the file as stored (gzip)
    text: bytes  # decompressed
    gpu_copies: frozenset[tuple[float, float, int | None]]  # (start, dur, bytes)
    host_copies: frozenset[tuple[float, float, int | None]]  # every copy_ read as a host copy
    kernels: frozenset[tuple[float, float]]
    span_us: float


@functools.cache
def whole(name: str) -> Whole:
    raw = fixture_path(name).read_bytes()
    text = gzip.decompress(raw)
    trace = parse_chrome_bytes(raw, name)
    _, events, _, _, _ = parse_chrome_json(text.decode())
    xs = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    cpu_ops = [e for e in xs if e.get("cat") == "cpu_op"]
    runtime = [e for e in xs if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    # A cut that loses every GPU memcpy event leaves the host-side copy_ ops, which the
    # reader then reports: their numbers are these, read the same way from the whole file.
    host = host_copies(cpu_ops, runtime, trace.has_gpu, trace.hbm_threshold_gbps, _info())
    assert any(e.get("name") in CPU_COPY_OPS and copy_bytes(e["args"]) for e in cpu_ops)
    return Whole(
        raw=raw,
        text=text,
        gpu_copies=frozenset(
            (c.start_us, c.dur_us, c.bytes) for c in trace.copies if c.source == "gpu"
        ),
        host_copies=frozenset((c.start_us, c.dur_us, c.bytes) for c in host),
        kernels=frozenset((k.start_us, k.dur_us) for k in trace.kernels),
        span_us=trace.span_us,
    )


def _info() -> ReadInfo:
    return ReadInfo("whole", "torch-chrome", 0, 0)


def _read_cut(data: bytes, suffix: str) -> Trace | ParseError:
    """read_trace on ``data`` written to a file: the trace, or the ParseError it raised.
    Any other exception fails the test, as it would reach the user as a traceback."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"cut{suffix}"
        path.write_bytes(data)
        try:
            return read_trace(path)
        except ParseError as err:
            message = str(err)
            assert message.startswith(str(path)) and "\n" not in message, message
            return err


def _assert_only_the_whole_files_numbers(t: Trace, w: Whole) -> None:
    for c in t.copies:
        numbers = (c.start_us, c.dur_us, c.bytes)
        if c.source == "gpu":
            assert numbers in w.gpu_copies, c
        else:
            assert numbers in w.host_copies and c.link_inferred, c
    for k in t.kernels:
        assert (k.start_us, k.dur_us) in w.kernels, k
    assert t.span_us <= w.span_us
    rows = trace_rows(t, "cut")
    sizes = {b for _, _, b in w.gpu_copies | w.host_copies}
    for r in rows:
        assert r.size_bytes in sizes
        assert r.extra.get("trace_truncated") is True  # every row says the file was cut


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(TRACES), gz=st.booleans(), data=st.data())
def test_cut_trace_says_so_and_keeps_only_what_the_file_says(
    name: str, gz: bool, data: st.DataObject
) -> None:
    w = whole(name)
    stored = w.raw if gz else w.text
    cut = data.draw(st.integers(min_value=0, max_value=len(stored) - 1), label="cut")
    got = _read_cut(stored[:cut], ".json.gz" if gz else ".json")
    if isinstance(got, ParseError):
        return  # one line, naming the file (checked in _read_cut)
    if not gz and stored[:cut].rstrip() == stored.rstrip():
        return  # only trailing whitespace was cut: the file says everything it said
    assert got.info.truncated and not got.info.complete
    assert any("cut off" in w or "ends early" in w for w in got.info.warnings)
    _assert_only_the_whole_files_numbers(got, w)


@functools.cache
def _nsys_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "whole.sqlite"
        make_nsys_sqlite(path)
        return path.read_bytes()


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_cut_nsys_export_is_one_clear_error(data: st.DataObject) -> None:
    raw = _nsys_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(raw) - 1), label="cut")
    got = _read_cut(raw[:cut], ".sqlite")
    # SQLite reads pages past the end of a cut file as zeros, which would give rows of
    # NULLs: no cut of an export is read as data.
    assert isinstance(got, ParseError)
    if cut >= len("SQLite"):
        assert "cut off" in str(got)
