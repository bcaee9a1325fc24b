"""A :class:`~gpulane.analysis.export.schema.Document` as JSON, JUnit XML or metrics.

Metrics go through prometheus-client's own registry and exposition: OpenMetrics text
(``generate_latest`` of ``prometheus_client.openmetrics.exposition``), the Prometheus
text format for node_exporter's textfile collector (``write_to_textfile``, which writes a
temporary file and renames it, so the collector never reads half a file), and a
Pushgateway push (``push_to_gateway``).

Metric names (base units, as Prometheus wants them):

- ``gpulane_accept_passed{group,build,verdict}``: 1 when the accept run passed, else 0
  (an INCOMPLETE or FAIL verdict is 0; ``verdict`` says which);
- ``gpulane_accept_check_passed{rule,subject,basis,build}``: 1 pass, 0 fail (skipped
  checks are left out: a check that did not run is never a pass);
- ``gpulane_accept_check_margin_ratio{...}``: (value - threshold) / threshold;
- ``gpulane_collective_busbw_bytes_per_second{op,path,world_size,size,build,host,...}``;
- ``gpulane_copy_bandwidth_bytes_per_second{op,gpu,pair,memory,size,build,host,...}``;
- ``gpulane_tokens_per_second{op,model,tp,pp,batch,build,host,...}``;

Every figure carries the versions its rows recorded: ``nccl``, ``cuda``, ``driver``,
``torch``, ``gpulane``, and ``gpu_model``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpulane.analysis.export.schema import Document, Figure

PREFIX = "gpulane"
FIGURE_METRICS = {
    "collective_busbw": (
        "collective_busbw_bytes_per_second",
        "collective bus bandwidth at the largest size measured, bytes/s",
    ),
    "copy_bandwidth": (
        "copy_bandwidth_bytes_per_second",
        "copy bandwidth per GPU (h2d, d2h) or pair (p2p) at the largest size, bytes/s",
    ),
    "tokens_rate": ("tokens_per_second", "token rate of a decode or prefill run"),
}
CHECK_LABELS = ("rule", "subject", "basis", "build", "group")


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels)


class DocumentCollector(Collector):
    """Yields the document's metrics each time the registry is read."""

    def __init__(self, document: Document) -> None:
        self.document = document

    def collect(self) -> Iterator[Metric]:
        d = self.document
        passed = _gauge(
            "accept_passed",
            "1 when gpulane accept passed, else 0 (verdict: what accept.json says)",
            ["group", "build", "verdict"],
        )
        for group, status in sorted(d.accepts.items()):
            build = next((c.build for c in d.checks if c.group == group), "")
            passed.add_metric([group, build, status], 1.0 if status == "PASS" else 0.0)
        yield passed
        check = _gauge(
            "accept_check_passed",
            "1 pass, 0 fail per accept check (skips left out)",
            list(CHECK_LABELS),
        )
        margin = _gauge(
            "accept_check_margin_ratio",
            "(value - threshold) / threshold of an accept check",
            list(CHECK_LABELS),
        )
        seen: set[tuple[str, ...]] = set()
        for c in d.checks:
            if c.status not in ("pass", "fail"):
                continue
            labels = [c.rule, c.subject, c.basis, c.build, c.group]
            if tuple(labels) in seen:  # two checks of one rule on one subject: the first
                continue
            seen.add(tuple(labels))
            check.add_metric(labels, 1.0 if c.status == "pass" else 0.0)
            if c.margin is not None:
                margin.add_metric(labels, c.margin)
        yield check
        yield margin
        yield from _figures(d.figures)


def _figures(figures: list[Figure]) -> Iterator[Metric]:
    for metric, (name, doc) in FIGURE_METRICS.items():
        mine = [f for f in figures if f.metric == metric]
        if not mine:
            continue
        names = sorted({k for f in mine for k in f.labels})
        family = _gauge(name, doc, names)
        for f in mine:
            family.add_metric([f.labels.get(k, "") for k in names], f.value)
        yield family


def registry(document: Document) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(DocumentCollector(document))
    return reg


def openmetrics(document: Document) -> str:
    from prometheus_client.openmetrics.exposition import generate_latest

    return generate_latest(registry(document)).decode("utf-8")


def prometheus_text(document: Document) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry(document)).decode("utf-8")


def json_text(document: Document) -> str:
    return json.dumps(document.to_dict(), indent=1, sort_keys=False) + "\n"


def junit(document: Document) -> str:
    """The checks as JUnit XML (one test suite per accept group)."""
    suites = ET.Element("testsuites", name="gpulane export")
    for group in sorted({c.group for c in document.checks}):
        checks = [c for c in document.checks if c.group == group]
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=group,
            tests=str(len(checks)),
            failures=str(sum(c.status == "fail" for c in checks)),
            skipped=str(sum(c.status not in ("pass", "fail") for c in checks)),
            errors="0",
        )
        for c in checks:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"gpulane.accept.{c.rule}",
                name=f"{c.basis} {c.subject}",
            )
            if c.status == "fail":
                ET.SubElement(case, "failure", message=c.message, type=c.basis).text = c.message
            elif c.status != "pass":
                ET.SubElement(case, "skipped", message=c.message)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
