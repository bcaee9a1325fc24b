"""The HTML report, rendered in a real headless browser (Debian's chromium)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gpulane.analysis.report import render_report
from gpulane.analysis.rules import evaluate
from gpulane.analysis.store import load_frame
from tests.analysis.fixture_rows import (
    copy_rows,
    downtrained,
    h200_topology,
    nccl_rows,
    tokens_rows,
    write_run,
)
from tests.analysis.rules.rule_sets import rule_set

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(
        "chromium is not installed (apt-get install -y chromium): the report test needs a real browser"
    )


class Dom(HTMLParser):
    """What the browser's DOM holds: elements by id, images, table cells."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.imgs: list[dict[str, str]] = []
        self.text: list[str] = []
        self.rows_in: dict[str, int] = {}
        self._table: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids[a["id"]] = tag
        if tag == "img":
            self.imgs.append(a)
        if tag == "table":
            self._table.append(a.get("id", ""))
        if tag == "tr" and self._table:
            self.rows_in[self._table[-1]] = self.rows_in.get(self._table[-1], 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._table:
            self._table.pop()

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())


def browse(html_file: Path, tmp: Path) -> tuple[Dom, Path]:
    exe = chromium()
    profile = tmp / "chromium-profile"
    shot = tmp / "screenshot.png"
    url = html_file.resolve().as_uri()
    base = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    proc = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = Dom()
    dom.feed(proc.stdout)
    proc = subprocess.run(
        [*base, "--window-size=1400,2400", f"--screenshot={shot}", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    return dom, shot


def assert_nontrivial_png(path: Path) -> None:
    import matplotlib.image as mpimg

    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000
    img = mpimg.imread(path)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    # Not a blank page: many distinct colours and real contrast.
    flat = (img[..., :3] * 255).astype("uint8").reshape(-1, 3)
    assert len({tuple(p) for p in flat[:: max(1, len(flat) // 50_000)]}) > 50
    assert float(img[..., :3].std()) > 0.05


@pytest.fixture
def group(tmp_path: Path) -> Path:
    root = tmp_path / "group"
    write_run(
        root,
        nccl_rows("h200x2/nccl-tests-all_reduce.txt", build="nvlink", run_id="r-nvlink")
        + nccl_rows("h200x2/nccl-tests-all_gather.txt", build="nvlink", run_id="r-nvlink")
        + copy_rows(build="nvlink", run_id="r-nvlink", p2p_gbps={("GPU0", "GPU1"): 390.0})
        + tokens_rows(build="nvlink", run_id="r-nvlink", rate=1000.0),
    )
    write_run(
        root,
        nccl_rows(
            "h200x2/nccl-tests-all_reduce-p2p-disabled.txt", build="pcie-host", run_id="r-pcie"
        ),
    )
    (root / "topology.json").write_text(json.dumps(downtrained(h200_topology(), "GPU1", 4, 8)))
    return root


def test_report_in_a_real_browser(group: Path, tmp_path: Path) -> None:
    frame = load_frame([group])
    topology = json.loads((group / "topology.json").read_text())
    verdict = evaluate(frame, rule_set(), topology)
    assert not verdict.passed
    html_file = tmp_path / "report.html"
    html_file.write_text(
        render_report(frame, topology, verdict, title="gpulane accept: test", sources=[str(group)])
    )
    text = html_file.read_text()
    # Self-contained: nothing fetched from anywhere.
    assert "http://" not in text and "https://" not in text and "<script" not in text

    dom, shot = browse(html_file, tmp_path)
    for element_id in (
        "verdict",
        "checks",
        "summary",
        "topology-matrix",
        "topology-gpus",
        "topology-p2p",
        "topology-warnings",
        "table-collective",
        "table-copy",
        "table-tokens",
    ):
        assert element_id in dom.ids, element_id
    plots = {i["id"]: i for i in dom.imgs}
    assert set(plots) == {"plot-busbw", "plot-copy", "plot-tokens"}
    for img in plots.values():
        assert img["src"].startswith("data:image/png;base64,") and len(img["src"]) > 10_000
    assert dom.rows_in["checks"] == len(verdict.checks) + 1  # header row
    assert dom.rows_in["topology-matrix"] == 3
    words = " ".join(dom.text)
    assert "FAIL" in words and "pcie_max_link" in words and "all_reduce_busbw_nvlink" in words
    assert "PCIe link at Gen4 x8, capable of Gen5 x16 (downtrained)" in words
    assert "NV18" in words
    assert_nontrivial_png(shot)


def test_report_command(group: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpulane.cli", "report", str(group)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    out = group / "report.html"
    assert proc.stdout.strip() == f"# report: {out}"
    dom, shot = browse(out, tmp_path)
    assert "checks" not in dom.ids  # no accept.json: no acceptance section
    assert {"plot-busbw", "plot-copy", "plot-tokens"} <= {i["id"] for i in dom.imgs}
    assert "topology-matrix" in dom.ids and "table-collective" in dom.ids
    assert_nontrivial_png(shot)
    # A run with no topology and only one kind of row still renders.
    single = tmp_path / "single.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulane.cli",
            "report",
            str(group / "r-pcie"),
            "-o",
            str(single),
            "--topology",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "No topology recorded" in single.read_text() and 'id="plot-busbw"' in single.read_text()
