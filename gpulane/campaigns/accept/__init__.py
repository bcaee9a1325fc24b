"""`gpulane accept`: the acceptance suite, the rule check and its outputs.

``run`` (the task: measure or take rows, check, write), ``suite`` (the commands it runs),
``inputs`` (topology and baseline), ``output`` (JUnit, the printed verdict).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Each name from the module that holds it, imported when first asked for: `gpulane accept
# --help` reads the rule sets (rules_input) without loading the suite, pandas or torch.
_WHERE = {
    "resolve_baseline": "inputs",
    "resolve_topology": "inputs",
    "store_baseline": "inputs",
    "junit_xml": "output",
    "print_verdict": "output",
    "verdict_table": "output",
    "ACCEPT_JSON": "run",
    "JUNIT_XML": "run",
    "REPORT_HTML": "run",
    "Outcome": "run",
    "accept": "run",
    "run_accept": "run",
    "Step": "suite",
    "gpu_count": "suite",
    "probe_live_topology": "suite",
    "run_suite": "suite",
    "step_checks": "suite",
    "suite_steps": "suite",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)


__all__ = [
    "ACCEPT_JSON",
    "JUNIT_XML",
    "REPORT_HTML",
    "Outcome",
    "Step",
    "accept",
    "gpu_count",
    "junit_xml",
    "print_verdict",
    "probe_live_topology",
    "resolve_baseline",
    "resolve_topology",
    "run_accept",
    "run_suite",
    "step_checks",
    "store_baseline",
    "suite_steps",
    "verdict_table",
]
