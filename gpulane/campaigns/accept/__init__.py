"""`gpulane accept`: the acceptance suite, the rule check and its outputs.

``run`` (the task: measure or take rows, check, write), ``suite`` (the commands it runs),
``inputs`` (topology and baseline), ``output`` (JUnit, the printed verdict).
"""

from __future__ import annotations

from gpulane.campaigns.accept.inputs import resolve_baseline, resolve_topology, store_baseline
from gpulane.campaigns.accept.output import junit_xml, print_verdict, verdict_table
from gpulane.campaigns.accept.run import (
    ACCEPT_JSON,
    JUNIT_XML,
    REPORT_HTML,
    Outcome,
    accept,
    run_accept,
)
from gpulane.campaigns.accept.suite import (
    Step,
    gpu_count,
    probe_live_topology,
    run_suite,
    step_checks,
    suite_steps,
)

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
