"""The exported metrics against the real thing: promtool, a Prometheus server scraping
them, a Pushgateway receiving a push. These fail (never skip) when the Debian packages
prometheus / prometheus-pushgateway are missing; everything listens on 127.0.0.1 only."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpulane.cli import main

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "benchmarks/collectives/h200x2-issue20/runs/20261123-053007-plain-big-9a69"
ACCEPT = ROOT / "benchmarks/accept/h200x2/nvlink"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed (Debian package; scripts/test.sh installs it)"
    return path


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _export(target: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["export", str(target), "--format", fmt]) == 0
    return capsys.readouterr().out


def _busbw_8g(text: str) -> float:
    line = next(
        ln
        for ln in text.splitlines()
        if ln.startswith("gpulane_collective_busbw_bytes_per_second{") and 'op="all_reduce"' in ln
    )
    assert 'size="8589934592"' in line and 'nccl="2.28.9"' in line and 'build="plain-big"' in line
    return float(line.rsplit(" ", 1)[1])


def test_promtool_accepts_both_formats(capsys: pytest.CaptureFixture[str]) -> None:
    promtool = _tool("promtool")
    for target in (RUN, ACCEPT):
        for fmt in ("openmetrics", "prometheus"):
            text = _export(target, fmt, capsys)
            done = subprocess.run(
                [promtool, "check", "metrics"], input=text, capture_output=True, text=True
            )
            assert done.returncode == 0, (fmt, done.stdout, done.stderr)


class _Serve(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", OPENMETRICS)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def exporter(capsys: pytest.CaptureFixture[str]) -> Iterator[tuple[int, float]]:
    text = _export(RUN, "openmetrics", capsys)
    handler = type("H", (_Serve,), {"body": text.encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1]), _busbw_8g(text)
    server.shutdown()


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def test_a_real_prometheus_scrapes_the_export(tmp_path: Path, exporter: tuple[int, float]) -> None:
    prometheus = _tool("prometheus")
    port, expected = exporter
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: gpulane\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
    )
    web = _port()
    proc = subprocess.Popen(
        [
            prometheus,
            f"--config.file={config}",
            f"--web.listen-address=127.0.0.1:{web}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    query = 'gpulane_collective_busbw_bytes_per_second{op="all_reduce",build="plain-big"}'
    url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        deadline, result = time.monotonic() + 40, list[dict[str, Any]]()
        while time.monotonic() < deadline and not result:
            time.sleep(0.5)
            try:
                result = _get(url)["data"]["result"]
            except OSError:
                assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
        assert result, (
            "Prometheus never had the series: " + (tmp_path / "prometheus.log").read_text()[-2000:]
        )
        (series,) = result
        assert float(series["value"][1]) == pytest.approx(expected, rel=1e-9)
        assert 3.4e11 < expected < 3.6e11  # the committed 8 GiB all_reduce, ~349 GB/s
        assert series["metric"]["path"] == "NV18" and series["metric"]["gpu_model"] == "NVIDIA H200"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_push_to_a_real_pushgateway(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gateway = _tool("prometheus-pushgateway")
    port = _port()
    proc = subprocess.Popen(
        [gateway, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "pgw.log").open("w"),
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url + "/-/ready", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        assert main(["export", str(ACCEPT), "--push", url, "--job", "accept"]) == 0
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        line = next(
            ln
            for ln in text.splitlines()
            if ln.startswith("gpulane_accept_passed{") and 'job="accept"' in ln
        )
        assert line.endswith(" 0")  # that accept run failed its pinned_h2d rule
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    capsys.readouterr()


def test_textfile_is_written_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prom = tmp_path / "gpulane.prom"
    assert main(["export", str(RUN), "--textfile", str(prom)]) == 0
    text = prom.read_text()
    assert _busbw_8g(text) > 3e11 and not list(tmp_path.glob("*.tmp*"))
    assert main(["export", str(RUN), "--textfile", str(tmp_path / "x.txt")]) == 2
    assert "only files ending in .prom" in capsys.readouterr().err
