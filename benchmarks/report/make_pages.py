"""Build every gpulane page from what is committed, render each in headless Chromium, and
keep a screenshot of its top here (PNG, half scale) with the page sizes.

    PYTHONPATH=. python3 benchmarks/report/make_pages.py [OUT]

Pages (written under OUT, default a temporary directory; HTML is not kept here):
- compare.html: `gpulane compare` of the recorded 2×H200 builds (nvlink, pcie-host,
  socket: benchmarks/inference/h200x2/builds + the nccl-tests logs of
  benchmarks/collectives/h200x2 + benchmarks/accept/h200x2's topology), with --html;
- accept.html: `gpulane accept run=<socket> baseline=<nvlink>` on the same rows;
- hundred.html: `gpulane report` of 100 synthetic runs (tests/report_pages.py);
- one-run.html: `gpulane report` of the nvlink nccl-tests import alone.
The same pages, built the same way, are what tests/analysis/test_report.py checks.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from tests.browser import render
from tests.helpers import gpulane
from tests.report_pages import recorded_builds, synthetic_runs

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="gpulane-pages-"))
    out.mkdir(parents=True, exist_ok=True)
    builds = recorded_builds(out / "builds")
    runs = synthetic_runs(out / "hundred-runs", runs=100)
    pages = {
        "compare": (["compare", *(str(builds / b) for b in ("nvlink", "pcie-host", "socket")),
                     "--html", str(out / "compare.html")], out / "compare.html"),
        "accept": (["accept", f"run={builds / 'socket'}", f"baseline={builds / 'nvlink'}",
                    f"out={out / 'accept'}"], out / "accept" / "report.html"),
        "hundred": (["report", str(runs), "-o", str(out / "hundred.html")], out / "hundred.html"),
        "one-run": (["report", str(builds / "nvlink" / "nccl-tests"), "-o",
                     str(out / "one-run.html")], out / "one-run.html"),
    }  # fmt: skip
    print("| page | command | HTML bytes | plots | page height (CSS px, tables open) |")
    print("|---|---|---:|---:|---:|")
    for name, (args, page) in pages.items():
        proc = gpulane(*args, cwd=out)
        if proc.returncode not in (0, 1):  # accept exits 1: the socket build fails
            sys.stderr.write(proc.stdout + proc.stderr)
            return proc.returncode
        shot = HERE / f"{name}.png"
        shown = render(page, out / "browser" / name, screenshot=shot)
        m = shown.measure
        assert not m["wide"] and m["scroll_width"] <= m["viewport"], m
        print(
            f"| {name} | gpulane {args[0]} | {page.stat().st_size} | {m['svgs']} | {m['height']} |"
        )
    shutil.rmtree(out / "browser", ignore_errors=True)
    print(f"# pages under {out}; screenshots under {HERE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
