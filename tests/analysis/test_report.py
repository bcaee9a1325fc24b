"""Every page rendered in a real headless browser (Debian's chromium): the build comparison
page of the recorded 2×H200 builds, the report of 100 runs, a single run's report, the
accept report; each through the real command, on the real files."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest

from gpulane.record import Row
from tests.browser import assert_fits, render
from tests.helpers import gpulane
from tests.report_pages import BENCH, recorded_builds, synthetic_runs

MAX_PAGE_BYTES = 2 * 1024 * 1024
SECTIONS_COMPARE = ("verdict", "topology", "collectives", "copies", "tokens", "advice", "figures")


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded_builds(tmp_path_factory.mktemp("builds"))


@pytest.fixture(scope="module")
def hundred(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_runs(tmp_path_factory.mktemp("hundred") / "runs", runs=100)


def rows_of(directory: Path) -> list[Row]:
    """Every row of the rows files, with its run's facts joined (an import keeps them once
    in facts.jsonl beside rows.jsonl)."""
    from gpulane.record import read_rows

    out = []
    for f in sorted(directory.rglob("rows.jsonl")):
        out += list(read_rows(f))
    return out


def busbw_ratio_at_64m(builds: Path, build: str, reference: str = "nvlink") -> float:
    """The geometric mean of build/reference all_reduce busbw over the figures both
    measured at 64 MiB and up, straight from the rows files."""

    def medians(name: str) -> dict[tuple, float]:
        points: dict[tuple, list[float]] = {}
        for r in rows_of(builds / name):
            measured = r.kind == "collective" and r.op == "all_reduce" and r.status == "ok"
            if measured and (r.size_bytes or 0) >= 64 << 20 and (r.busbw_gbps or 0) > 0:
                key = (r.dtype, r.in_place, bool(r.graph), r.size_bytes)
                points.setdefault(key, []).append(r.busbw_gbps)
        return {k: statistics.median(v) for k, v in points.items()}

    a, b = medians(reference), medians(build)
    ratios = [b[k] / a[k] for k in a.keys() & b.keys()]
    assert len(ratios) >= 10
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def test_compare_page_of_the_recorded_builds(builds: Path, tmp_path: Path) -> None:
    page, plots = tmp_path / "builds.html", tmp_path / "plots"
    proc = gpulane(
        "compare", *(str(builds / b) for b in ("nvlink", "pcie-host", "socket")),
        "--html", str(page), "--plot", str(plots), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"# page: {page}" in proc.stdout
    text = page.read_text()
    assert len(text.encode()) < MAX_PAGE_BYTES
    assert not re.search(r'(src|href)="(https?:)?//', text)  # nothing fetched
    pngs = sorted(p.name for p in plots.glob("*.png"))
    assert "tokens-llama3-8b-input-1024-output-64.png" in pngs
    assert any(n.startswith("collective-all_reduce") for n in pngs)

    shown = render(page, tmp_path / "browser")
    dom = shown.dom
    for section in SECTIONS_COMPARE:
        assert section in dom.ids, section
    # the sections come in the order
    order = [text.index(f'id="{s}"') for s in SECTIONS_COMPARE]
    assert order == sorted(order)
    words = dom.words()
    # line 1: computed from the rows files, and the token rows of benchmarks/inference
    pcie = busbw_ratio_at_64m(builds, "pcie-host")
    sock = busbw_ratio_at_64m(builds, "socket")
    assert f"pcie-host: all_reduce busbw {pcie:.2g}× nvlink at ≥ 64 MiB" in words
    assert f"socket: all_reduce busbw {sock:.2g}× nvlink at ≥ 64 MiB" in words
    # pcie-host TP=2 at batch 16: decode 2494.9 vs 2939.4 tok/s, prefill 32439 vs 63369
    assert "TP=2 decode −15 %, prefill −49 % at batch 16" in words
    # line 2: socket decodes faster with PP=2 (2326 tok/s) than TP=2 (1000 tok/s)
    assert "decode faster with TP=2 on nvlink, pcie-host; PP=2 on socket" in words
    assert "advisor, for throughput:" in words
    # topology per build: the matrix, the PCIe links, and the transport said to be unknown
    for i in range(3):
        assert {f"topology-matrix-{i}", f"topology-gpus-{i}", f"advice-{i}"} <= set(dom.ids)
    assert words.count("unknown: the rows do not say") == 3
    assert "NCCL_P2P_DISABLE=1" in words and "NCCL_SHM_DISABLE=1" in words
    assert "Gen5 x16" in words and "NV18" in words
    # in-place and out-of-place apart, or the choice stated
    assert "all_reduce · torch-nccl · bfloat16 (in-place only)" in words
    assert 'id="plot-collective-all_reduce-nccl-tests-float"' in text
    assert "No copy rows" in words
    assert_fits(shown)


def test_report_of_a_hundred_runs(hundred: Path, tmp_path: Path) -> None:
    page = tmp_path / "hundred.html"
    proc = gpulane(
        "report", str(hundred), "-o", str(page), "--plot", str(tmp_path / "png"), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert len(text.encode()) < MAX_PAGE_BYTES
    shown = render(page, tmp_path / "browser")
    dom, words = shown.dom, shown.dom.words()
    # a time range, not a hundred start times
    assert "2026-11-01 08:00 – 2026-11-10 22:24 UTC (9.6 days)" in words
    assert len(re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d", text)) <= 1  # the generation time
    # runs grouped by build and kind: 4 builds x 3 kinds (+ the header row)
    assert dom.rows_in["runs-by-build"] == 13
    assert "P2P/CUMEM" in words and "NET/Socket" in words  # the transport, from extra.nccl
    for section in ("summary", "collectives", "copies", "tokens", "topology", "errors"):
        assert section in dom.ids or f"{section}-section" in dom.ids, section
    # a wide table scrolls inside its own box instead of widening the page
    assert shown.measure["scrolling"], shown.measure
    assert_fits(shown)
    assert len(list((tmp_path / "png").glob("*.png"))) == 4


def test_report_of_one_run(builds: Path, tmp_path: Path) -> None:
    run = builds / "nvlink" / "nccl-tests"
    proc = gpulane("report", str(run), "-o", str(tmp_path / "one.html"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = render(tmp_path / "one.html", tmp_path / "browser")
    words = shown.dom.words()
    assert "8 B" in words and "8 GiB" in words
    assert "No topology recorded" not in words  # builds/nvlink/topology.json, one level up
    assert_fits(shown)  # no size cell wraps: "8 B" stays on one line


def test_accept_report_plots_current_against_baseline(builds: Path, tmp_path: Path) -> None:
    out = tmp_path / "accept"
    proc = gpulane(
        "accept", f"run={builds / 'socket'}", f"baseline={builds / 'nvlink'}", f"out={out}",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    page = out / "report.html"
    text = page.read_text()
    assert len(text.encode()) < MAX_PAGE_BYTES
    shown = render(page, tmp_path / "browser")
    dom, words = shown.dom, shown.dom.words()
    for element in ("acceptance", "verdict", "checks", "findings", "plot-accept-margins"):
        assert element in dom.ids, element
    assert "FAIL" in words and "collective_busbw_vs_baseline" in words
    # the current socket rows against the nvlink baseline, the failing points in red
    curves = re.findall(r'<svg id="plot-accept-collective[^"]*".*?</svg>', text, re.S)
    assert curves and any("#cf222e" in svg for svg in curves)
    assert "failing check" in text and "baseline" in words
    # accept's doctor read the stored rows: the socket build's NCCL switches are findings,
    # noted as the run's own choice (its config.yaml asked for preset=socket)
    assert "NCCL_P2P_DISABLE=1 was the run's choice" in words
    assert_fits(shown)

    # the doctor's findings, as accept.json carries them, beside the rules
    accept = json.loads((out / "accept.json").read_text())
    accept["findings"] = [
        {"severity": "info", "check": "persistence", "title": "persistence mode off",
         "evidence": "Persistence Mode : Disabled", "why": "first call slower", "fix": "nvidia-smi -pm 1"},
        {"severity": "high", "check": "nccl_env", "title": "NCCL_P2P_DISABLE=1 set",
         "evidence": "NCCL_P2P_DISABLE=1", "why": "NVLink unused", "fix": "unset NCCL_P2P_DISABLE"},
    ]  # fmt: skip
    (out / "accept.json").write_text(json.dumps(accept))
    second = tmp_path / "with-findings.html"
    proc = gpulane("report", str(builds / "socket"), "--accept", str(out / "accept.json"),
                   "-o", str(second), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    shown = render(second, tmp_path / "browser2")
    assert shown.dom.rows_in["findings-table"] == 3
    html = second.read_text()
    assert html.index("NCCL_P2P_DISABLE=1 set") < html.index("persistence mode off")  # high first
    assert_fits(shown)
    # the two texts below come from accept.json alone: one run of the build is enough
    # (1 collective plot of the page's own instead of 4: about 3 CPU-s a call less)
    one_run = builds / "socket" / "nccl-tests"
    accept["findings"] = []
    (out / "accept.json").write_text(json.dumps(accept))
    proc = gpulane("report", str(one_run), "--accept", str(out / "accept.json"),
                   "-o", str(second), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0 and "The doctor found nothing." in second.read_text()
    # accept keeps an empty list beside "doctor": {"ran": false} when its doctor did not run
    accept["doctor"] = {"ran": False}
    (out / "accept.json").write_text(json.dumps(accept))
    proc = gpulane("report", str(one_run), "--accept", str(out / "accept.json"),
                   "-o", str(second), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0 and "The doctor did not run" in second.read_text()


def one_line_error(proc: object, *words: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr  # type: ignore[attr-defined]
    err = proc.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(err) == 1 and err[0].startswith("gpulane: error: "), err
    for w in words:
        assert w in err[0], (w, err[0])


def test_bad_inputs_are_one_line(builds: Path, tmp_path: Path) -> None:
    run = builds / "nvlink" / "nccl-tests"
    not_json = BENCH / "collectives/h200x2/topo-m.txt"
    junit = BENCH / "accept/h200x2/nvlink/junit.xml"
    one_line_error(gpulane("report", str(run), "--topology", str(not_json), "-o", str(tmp_path / "x.html"), cwd=tmp_path), "topo-m.txt", "not JSON")  # fmt: skip
    one_line_error(gpulane("report", str(run), "--accept", str(junit), "-o", str(tmp_path / "x.html"), cwd=tmp_path), "junit.xml", "not JSON")  # fmt: skip
    one_line_error(gpulane("report", str(run), "--accept", str(not_json), cwd=tmp_path), "--accept")
    # a directory whose only rows file is garbage Parquet
    garbage = tmp_path / "garbage" / "run1"
    garbage.mkdir(parents=True)
    (garbage / "rows.parquet").write_bytes((BENCH / "accept/h200x2/plots/busbw.png").read_bytes())
    for command in ("results", "compare", "report", "join"):
        args = [str(garbage.parent)] * (2 if command == "compare" else 1)
        one_line_error(
            gpulane(command, *args, cwd=tmp_path),
            "rows.parquet",
            "not a readable rows Parquet file",
        )
    # compare -o to a path that cannot be written
    out = tmp_path / "no-such-dir" / "cmp.md"
    one_line_error(gpulane("compare", str(builds / "nvlink"), str(builds / "socket"), "-o", str(out), cwd=tmp_path), "-o", "cannot write")  # fmt: skip
    one_line_error(gpulane("compare", str(builds / "nvlink"), str(builds / "socket"), "--html", str(out), cwd=tmp_path), "--html", "cannot write")  # fmt: skip
    # an advisor model that does not exist: before any table is printed
    proc = gpulane("compare", str(builds / "nvlink"), str(builds / "socket"), "--html",
                   str(tmp_path / "x.html"), "--model", "nosuch", cwd=tmp_path)  # fmt: skip
    one_line_error(proc, "--model nosuch: no such model")
    assert proc.stdout == ""
