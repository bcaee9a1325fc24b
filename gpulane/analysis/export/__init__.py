"""Export: accept verdicts, check margins and key figures as JSON, JUnit or metrics."""

from gpulane.analysis.export.render import json_text, junit, openmetrics, prometheus_text, registry
from gpulane.analysis.export.schema import CheckResult, Document, Figure, collect

__all__ = [
    "CheckResult",
    "Document",
    "Figure",
    "collect",
    "json_text",
    "junit",
    "openmetrics",
    "prometheus_text",
    "registry",
]
