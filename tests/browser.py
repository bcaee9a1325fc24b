"""Pages rendered in a real headless browser (Debian's chromium): the DOM it built, layout
measurements taken in it, and a screenshot.

Measurements come from a copy of the page with a script added that runs after load: it
opens every collapsed box (so their tables count too), then lists each element whose
box reaches past the viewport, leaving out what sits inside a scroll box or an SVG (the
box itself is measured), each table cell holding a size (``8 B``, ``64 KiB``) that
wrapped onto a second line, and the tables wider than their scroll box. The page itself
holds no script.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]
WIDTH = 1280  # CSS pixels of the window: a laptop screen

MEASURE_JS = """
<script>
window.addEventListener('load', function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  var vw = document.documentElement.clientWidth;
  function inside(el) {
    for (var p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (p.tagName.toLowerCase() === 'svg') return true;
      if (getComputedStyle(p).overflowX !== 'visible') return true;
    }
    return false;
  }
  var wide = [];
  document.querySelectorAll('body *').forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return;
    if (inside(el)) return;
    if (r.right > vw + 1 || r.left < -1) {
      wide.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' ' +
                Math.round(r.left) + '..' + Math.round(r.right));
    }
  });
  var wrapped = [];
  var size = /^[0-9.]+ (B|KiB|MiB|GiB|TiB)$/;
  document.querySelectorAll('td, th').forEach(function (cell) {
    var text = cell.textContent.trim();
    if (!size.test(text)) return;
    var range = document.createRange();
    range.selectNodeContents(cell);
    var tops = {};
    Array.prototype.forEach.call(range.getClientRects(), function (q) { tops[Math.round(q.top)] = 1; });
    if (Object.keys(tops).length > 1) wrapped.push(text);
  });
  var scrolling = [];
  document.querySelectorAll('div.scroll').forEach(function (box) {
    if (box.scrollWidth > box.clientWidth + 1) {
      var t = box.querySelector('table');
      scrolling.push(t && t.id ? t.id : '?');
    }
  });
  var out = {viewport: vw, scroll_width: document.documentElement.scrollWidth,
             wide: wide, wrapped: wrapped, scrolling: scrolling,
             svgs: document.querySelectorAll('svg').length,
             height: document.documentElement.scrollHeight};
  var pre = document.createElement('pre');
  pre.id = 'gpulane-measure';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(
        "chromium is not installed (apt-get install -y chromium; scripts/test.sh installs "
        "it): the page tests need a real browser"
    )


class Dom(HTMLParser):
    """What the browser's DOM holds: element ids, text, table rows per table id."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.text: list[str] = []
        self.rows_in: dict[str, int] = {}
        self.measure: dict[str, Any] = {}
        self._table: list[str] = []
        self._in_measure = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids[a["id"]] = tag
        self._in_measure = a.get("id") == "gpulane-measure"
        if tag == "table":
            self._table.append(a.get("id", ""))
        if tag == "tr" and self._table:
            self.rows_in[self._table[-1]] = self.rows_in.get(self._table[-1], 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._table:
            self._table.pop()

    def handle_data(self, data: str) -> None:
        if self._in_measure:
            self.measure = json.loads(data)
            self._in_measure = False
        elif data.strip():
            self.text.append(data.strip())

    def words(self) -> str:
        return " ".join(self.text)


@dataclass
class Rendered:
    dom: Dom
    screenshot: Path
    measure: dict[str, Any] = field(default_factory=dict)


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=180)


def render(page: Path, tmp: Path, screenshot: Path | None = None, height: int = 2400) -> Rendered:
    """The page's DOM (with measurements) and a screenshot of its top ``height`` CSS px,
    at half scale (a small PNG)."""
    exe = chromium()
    tmp.mkdir(parents=True, exist_ok=True)
    measured = tmp / f"{page.stem}.measure.html"
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text, "the page itself holds no script"
    measured.write_text(text.replace("</body>", MEASURE_JS + "</body>"), encoding="utf-8")
    base = [exe, *FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}"]
    proc = _run([
        *base, f"--window-size={WIDTH},1000", "--run-all-compositor-stages-before-draw",
        "--virtual-time-budget=10000", "--dump-dom", measured.resolve().as_uri(),
    ])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = Dom()
    dom.feed(proc.stdout)
    assert dom.measure, "the measuring script did not run: " + proc.stderr[-1000:]
    shot = screenshot or tmp / f"{page.stem}.png"
    proc = _run([
        *base, f"--window-size={WIDTH},{height}", "--force-device-scale-factor=0.5",
        f"--screenshot={shot}", page.resolve().as_uri(),
    ])  # fmt: skip
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    return Rendered(dom, shot, dom.measure)


def assert_fits(rendered: Rendered) -> None:
    """Nothing wider than the viewport; no size cell wrapped; a real screenshot."""
    m = rendered.measure
    assert m["scroll_width"] <= m["viewport"], m
    assert not m["wide"], m["wide"]
    assert not m["wrapped"], m["wrapped"]
    assert_nontrivial_png(rendered.screenshot)


def assert_nontrivial_png(path: Path) -> None:
    import matplotlib.image as mpimg

    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000
    img = mpimg.imread(path)
    assert img.shape[0] >= 500 and img.shape[1] >= 600
    flat = (img[..., :3] * 255).astype("uint8").reshape(-1, 3)
    assert len({tuple(p) for p in flat[:: max(1, len(flat) // 50_000)]}) > 50
    assert float(img[..., :3].std()) > 0.05
