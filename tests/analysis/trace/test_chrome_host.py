"""Copies of a trace without GPU memcpy events, from host-side copy_ ops
(gpulane.analysis.trace.chrome_host), on CPU traces recorded here with torch.profiler."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.analysis.trace.events import ON_DEVICE, PCIE
from gpulane.analysis.trace.read import read_trace
from gpulane.analysis.trace.summary import summarize
from tests.analysis.trace.traces import (
    make_cpu_module,
)
from tests.conftest import fixture_path


@pytest.fixture(scope="module")
def recorded_cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mod = make_cpu_module()
    path = tmp_path_factory.mktemp("cpu") / "copies.json"
    mod.record(str(path))
    return path


def _expected_cpu_copy_bytes() -> list[int]:
    mod = make_cpu_module()
    size = {"float32": 4, "bfloat16": 2}
    per_round = [r * c * size[d] for r, c, d in mod.COPIES] + [1024 * 1024 * 4]
    return per_round


@pytest.mark.parametrize("source", ["recorded", "fixture"])
def test_cpu_trace_bytes_from_shapes(source: str, recorded_cpu_trace: Path) -> None:
    path = recorded_cpu_trace if source == "recorded" else fixture_path("traces/cpu/copies.json.gz")
    t = read_trace(path)
    assert not t.has_gpu and not t.has_gpu_activity
    sizes = [c.bytes for c in t.copies]
    expected = _expected_cpu_copy_bytes()
    # every copy_ we issued is there with its exact byte count, in order, per round
    it = iter(sizes)
    for _ in range(make_cpu_module().REPEATS):
        for want in expected:
            assert any(got == want for got in it), (want, sizes)
    for c in t.copies:
        assert c.direction == "H2H" and c.direction_inferred and c.link_inferred
        assert c.source == "cpu" and c.blocking is True and c.host_us == c.dur_us
    assert any("bandwidth rule" in w for w in t.info.warnings)
    s = summarize(t)
    assert s.inferred and s.rule and "200 GB/s" in s.rule
    assert s.overlap_fraction is None and s.kernels == 0
    assert s.blocking_us == pytest.approx(s.copy_time_us)


def test_cpu_trace_bandwidth_rule_is_configurable(recorded_cpu_trace: Path) -> None:
    default = read_trace(recorded_cpu_trace)
    assert all(c.link == PCIE for c in default.copies if (c.gbps or 0) <= 200)
    tiny = read_trace(recorded_cpu_trace, hbm_threshold_gbps=1e-6)
    # The rule exactly: above the threshold on-device, at or below PCIe. (A CI run had a
    # copy at or below 1e-6 GB/s: the trace holds small copy_ ops besides ours, and a few
    # bytes that wait milliseconds for a loaded CPU fall that low.)
    rated = [c for c in tiny.copies if c.gbps is not None]
    assert all((c.link == ON_DEVICE) == (c.gbps > 1e-6) for c in rated), [
        (c.bytes, c.dur_us, c.link) for c in rated
    ]
    # every copy of ours (4 KiB and up: 4 s to fall under the threshold) is on-device now
    ours = [c for c in tiny.copies if (c.bytes or 0) >= 4096]
    assert len(ours) >= len(_expected_cpu_copy_bytes()) and all(c.link == ON_DEVICE for c in ours)
    s = summarize(tiny)
    assert ON_DEVICE in s.by_link and s.rule and "1e-06 GB/s" in s.rule


def test_nested_copy_is_counted_once(recorded_cpu_trace: Path) -> None:
    # .to(float16) is aten::to -> aten::_to_copy -> aten::copy_: one copy of the 4 MiB source
    t = read_trace(recorded_cpu_trace)
    assert all(c.op == "aten::copy_" for c in t.copies)
    starts = [c.start_us for c in t.copies]
    assert len(starts) == len(set(starts))
