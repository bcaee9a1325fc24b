"""Acceptance rules over rows (and the topology), and the outliers among peers.

A rule set is a mapping (the Hydra group ``rules``, see ``gpulane/conf/rules/``)::

    outlier_fraction: 0.10          # a subject this far below its peers' median is named
    checks:
      all_reduce_busbw_nvlink:
        check: min                  # a row of CHECKS: min, max, no_wrong, status_ok,
                                    # pcie_link, p2p_status, nccl_transport, doctor
        description: all_reduce busbw at 1 GiB at least 0.6 of the NVLink line rate
        select: {kind: collective, op: all_reduce, size: 1G}   # size: a size, or max
        paths: ["NV*"]              # only rows whose path label matches (fnmatch)
        metric: busbw_gbps
        min: null                   # absolute, in the metric's unit
        min_fraction_of_expected: 0.6   # of the path's line rate from the topology
        min_fraction_of_baseline: null  # of the same figure in the baseline run
        per: auto                   # gpu, pair, node, all; auto: by kind and op
        outlier_fraction: null      # null: the rule set's; false: no outlier check
        required: false             # fail (not skip) when no row matches

Every check yields :class:`Check` lines: one per rule, basis (absolute, expected,
baseline, outlier, rows, topology) and subject (GPU, pair, node), each saying the value,
the threshold and by how much it missed. The modules: ``model`` (Check, Verdict,
Context, CheckSpec), ``load`` (the rule set), ``select`` and ``subjects`` (which rows,
about whom), ``linerate`` (a row's path and line rate, from gpulane.topology),
``checks`` (the CHECKS table) with ``threshold``, ``outliers``, ``row_checks``,
``topology_checks``, ``transport_checks`` (NCCL's transport against the path) and
``doctor_checks`` (gpulane doctor's findings), and ``evaluate``.
"""

from __future__ import annotations

from gpulane.analysis.rules.checks import CHECKS
from gpulane.analysis.rules.evaluate import evaluate
from gpulane.analysis.rules.linerate import expected_gbps, row_path
from gpulane.analysis.rules.load import load_rules, merge_rule_sets
from gpulane.analysis.rules.model import FAIL, PASS, SKIP, Check, CheckSpec, Context, Verdict
from gpulane.analysis.rules.select import select_rows
from gpulane.analysis.rules.subjects import subject_of

__all__ = [
    "CHECKS",
    "FAIL",
    "PASS",
    "SKIP",
    "Check",
    "CheckSpec",
    "Context",
    "Verdict",
    "evaluate",
    "expected_gbps",
    "load_rules",
    "merge_rule_sets",
    "row_path",
    "select_rows",
    "subject_of",
]
