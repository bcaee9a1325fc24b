"""The CHECKS table: every check type a rule can name with ``check:``.

Adding a check is one row here plus its function ``(rule_id, rule, ctx) -> [Check]``:
the loader learns its keys from the row and the evaluator runs it, skipping it (with the
reason) when an input it ``needs`` is missing. An input beside rows, topology and
baseline (``gpulane doctor``'s findings, say) reaches the check through
``evaluate(..., evidence={"doctor": ...})`` and ``ctx.evidence``.
"""

from __future__ import annotations

from gpulane.analysis.rules.doctor_checks import check_doctor
from gpulane.analysis.rules.foreign_checks import check_no_foreign
from gpulane.analysis.rules.model import CheckSpec
from gpulane.analysis.rules.p2p_trust_checks import check_p2p_trust
from gpulane.analysis.rules.row_checks import check_no_wrong, check_status_ok
from gpulane.analysis.rules.threshold import check_max, check_min
from gpulane.analysis.rules.topology_checks import check_p2p_status, check_pcie_link
from gpulane.analysis.rules.transport_checks import check_nccl_transport

# Keys every rule may set, whatever its check.
COMMON_KEYS = ("check", "description", "select", "required", "enabled", "supplied_by")

CHECKS: dict[str, CheckSpec] = {
    "min": CheckSpec(
        run=check_min,
        needs=("rows",),
        threshold="pass when the metric >= min, >= min_fraction_of_expected x the path's "
        "line rate (topology), >= min_fraction_of_baseline x the baseline's figure; an "
        "outlier fails when more than outlier_fraction below its peers' median",
        keys=(
            "metric",
            "paths",
            "per",
            "outlier_fraction",
            "min",
            "min_fraction_of_expected",
            "min_fraction_of_baseline",
        ),
        required=("metric",),
        numbers=("min", "min_fraction_of_expected", "min_fraction_of_baseline"),
    ),
    "max": CheckSpec(
        run=check_max,
        needs=("rows",),
        threshold="pass when the metric <= max, <= max_fraction_of_baseline x the baseline's "
        "figure; an outlier fails when more than outlier_fraction above its peers' median",
        keys=("metric", "paths", "per", "outlier_fraction", "max", "max_fraction_of_baseline"),
        required=("metric",),
        numbers=("max", "max_fraction_of_baseline"),
    ),
    "no_wrong": CheckSpec(
        run=check_no_wrong,
        needs=("rows",),
        threshold="pass when every checked row has wrong == 0; one wrong element fails",
    ),
    "status_ok": CheckSpec(
        run=check_status_ok,
        needs=("rows",),
        threshold="pass when every selected row has status ok",
    ),
    "pcie_link": CheckSpec(
        run=check_pcie_link,
        needs=("topology",),
        threshold="pass when gen >= gen_max and width >= width_max on every link, and no "
        "source marked it downtrained",
        keys=("include_upstream",),
    ),
    "p2p_status": CheckSpec(
        run=check_p2p_status,
        needs=("topology",),
        threshold="pass when every GPU pair reads OK in each of the modes (all by default)",
        keys=("modes",),
    ),
    "nccl_transport": CheckSpec(
        run=check_nccl_transport,
        needs=("rows",),
        threshold="pass when NCCL used P2P (or NVLS) on NV# pairs and on PIX/PXB pairs whose "
        "P2P status is OK, and InfiniBand/RoCE (not sockets) between nodes, with GPUDirect RDMA "
        "where the GPU's nearest NIC is PIX/PXB from it (rows' extra.nccl, the topology)",
    ),
    "doctor": CheckSpec(
        run=check_doctor,
        needs=("doctor",),
        threshold="pass when gpulane doctor found nothing of severity fail_on (error) or worse",
        keys=("fail_on",),
    ),
    "no_foreign": CheckSpec(
        run=check_no_foreign,
        needs=("rows",),
        threshold="pass when no other process used a GPU of the run (pre-flight, NVML: the "
        "rows' extra.foreign); each GPU another process used fails, naming the process",
    ),
    "p2p_trust": CheckSpec(
        run=check_p2p_trust,
        needs=("rows",),  # the check itself tells "not applicable" from "not measured"
        threshold="pass when each GPU pair's small all_reduce finishes within the timeout and "
        "is not slower than min_ratio x the same pair with NCCL_P2P_DISABLE=1; not applicable "
        "on one GPU",
        keys=("timeout_s", "min_ratio"),
        numbers=("timeout_s", "min_ratio"),
    ),
}


def rule_keys() -> frozenset[str]:
    """Every key a rule may set: the common ones and those of every check in the table."""
    return frozenset(COMMON_KEYS).union(*(spec.keys for spec in CHECKS.values()))
