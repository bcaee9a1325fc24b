"""Acceptance rules over rows (and the topology), and the outliers among peers.

A rule set is a mapping (the Hydra group ``rules``, see ``gpulane/conf/rules/``)::

    outlier_fraction: 0.10          # a subject this far below its peers' median is named
    checks:
      all_reduce_busbw_nvlink:
        check: min                  # min, max, no_wrong, status_ok, pcie_link, p2p_status
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
the threshold and by how much it missed.
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from gpulane.analysis.store import FIGURE_KEYS, METRIC_UNITS, key_frame, records
from gpulane.errors import InputError
from gpulane.units import NVLINK4_LINK_GBPS, parse_size, pcie_gbps

CHECK_TYPES = ("min", "max", "no_wrong", "status_ok", "pcie_link", "p2p_status")
PASS, FAIL, SKIP = "pass", "fail", "skip"
_RULE_KEYS = {
    "check",
    "description",
    "select",
    "paths",
    "metric",
    "min",
    "max",
    "min_fraction_of_expected",
    "min_fraction_of_baseline",
    "max_fraction_of_baseline",
    "per",
    "outlier_fraction",
    "required",
    "enabled",
    "modes",
    "include_upstream",
}


@dataclass
class Check:
    rule: str
    status: str  # pass, fail, skip
    basis: str  # absolute, expected, baseline, outlier, rows, topology
    subject: str  # GPU0, GPU0->GPU1, a host, or "-"
    message: str
    description: str = ""
    figure: str | None = None
    value: float | None = None
    threshold: float | None = None
    unit: str = ""
    # (value - threshold) / threshold: negative is a shortfall ("12% below")
    margin: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Verdict:
    checks: list[Check] = field(default_factory=list)
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not any(c.status == FAIL for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    def counts(self) -> dict[str, int]:
        out = {PASS: 0, FAIL: 0, SKIP: 0}
        for c in self.checks:
            out[c.status] = out.get(c.status, 0) + 1
        return out

    def failed_rules(self) -> list[str]:
        return sorted({c.rule for c in self.failed})

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([c.to_dict() for c in self.checks])

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "counts": self.counts(),
            "failed_rules": self.failed_rules(),
            "checks": [c.to_dict() for c in self.checks],
        }


# -- the rule set -----------------------------------------------------------------------


def load_rules(spec: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], float | None]:
    """Validated rules (enabled ones, by id) and the rule set's outlier fraction."""
    checks = spec.get("checks") or {}
    if not isinstance(checks, Mapping):
        raise InputError("rules.checks: expected a mapping of rule id -> rule")
    default_outlier = spec.get("outlier_fraction")
    out: dict[str, dict[str, Any]] = {}
    for rule_id, raw in checks.items():
        if raw is None:
            continue
        if not isinstance(raw, Mapping):
            raise InputError(f"rules.checks.{rule_id}: expected a mapping")
        rule = dict(raw)
        unknown = set(rule) - _RULE_KEYS
        if unknown:
            raise InputError(
                f"rules.checks.{rule_id}: unknown key(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(_RULE_KEYS))}"
            )
        if rule.get("enabled", True) is False:
            continue
        check = rule.get("check")
        if check not in CHECK_TYPES:
            raise InputError(
                f"rules.checks.{rule_id}.check: {check!r} is not one of {', '.join(CHECK_TYPES)}"
            )
        if check in ("min", "max") and not rule.get("metric"):
            raise InputError(f"rules.checks.{rule_id}: a {check} rule needs metric")
        for key in ("min", "max", "min_fraction_of_expected", "min_fraction_of_baseline"):
            value = rule.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise InputError(f"rules.checks.{rule_id}.{key}: expected a number, got {value!r}")
        select = rule.get("select") or {}
        if not isinstance(select, Mapping):
            raise InputError(f"rules.checks.{rule_id}.select: expected a mapping of column: value")
        for key in ("size", "size_min", "size_max"):
            if key in select and select[key] is not None and str(select[key]) != "max":
                parse_size(select[key], f"rules.checks.{rule_id}.select.{key}")
        per = rule.get("per", "auto")
        if per not in ("auto", "gpu", "pair", "node", "all"):
            raise InputError(f"rules.checks.{rule_id}.per: expected auto, gpu, pair, node or all")
        out[str(rule_id)] = rule
    if default_outlier is not None and not (0 < float(default_outlier) < 1):
        raise InputError("rules.outlier_fraction: expected a fraction between 0 and 1")
    return out, (float(default_outlier) if default_outlier is not None else None)


# -- row selection --------------------------------------------------------------------------


def _values(v: Any) -> list[str]:
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    return [p for p in str(v).split(",")]


def select_rows(frame: pd.DataFrame, select: Mapping[str, Any]) -> pd.DataFrame:
    """Rows matching ``select``: column -> value, list or wildcard; ``size``, ``size_min``,
    ``size_max`` as sizes (``size: max`` keeps the largest size present)."""
    rows = frame
    size_max_wanted = False
    for key, want in select.items():
        if want is None:
            continue
        if key == "size":
            if str(want) == "max":
                size_max_wanted = True
                continue
            rows = rows[rows["size_bytes"] == parse_size(want)]
        elif key == "size_min":
            rows = rows[rows["size_bytes"] >= parse_size(want)]
        elif key == "size_max":
            rows = rows[rows["size_bytes"] <= parse_size(want)]
        elif key in rows.columns:
            pats = _values(want)
            rows = rows.loc[rows[key].map(lambda v, p=pats: _match(v, p)).astype(bool)]
        else:
            raise InputError(f"select: {key!r} is not a row column")
    if size_max_wanted and len(rows):
        rows = rows[rows["size_bytes"] == rows["size_bytes"].max()]
    return rows


def _match(value: Any, patterns: Sequence[str]) -> bool:
    """fnmatch against text; a missing value matches the pattern ``-`` only."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-" in patterns
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return any(fnmatch.fnmatchcase(text, p) for p in patterns)


# -- topology -------------------------------------------------------------------------------


def _gpu(topology: Mapping[str, Any] | None, name: Any) -> Mapping[str, Any] | None:
    if not topology or name is None:
        return None
    for g in topology.get("gpus") or []:
        if g.get("name") == name or str(g.get("index")) == str(name).removeprefix("GPU"):
            return g
    return None


def _pair(topology: Mapping[str, Any] | None, a: Any, b: Any) -> Mapping[str, Any] | None:
    if not topology:
        return None
    for p in topology.get("pairs") or []:
        if {p.get("a"), p.get("b")} == {a, b}:
            return p
    return None


def _gpu_pairs(topology: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if not topology:
        return []
    names = {g.get("name") for g in topology.get("gpus") or []}
    return [p for p in topology.get("pairs") or [] if p.get("a") in names and p.get("b") in names]


def pcie_line_rate(gpu: Mapping[str, Any] | None) -> float | None:
    """Per-direction line rate of a GPU's PCIe link as it runs now (gen, width)."""
    link = (gpu or {}).get("pcie") or {}
    gen, width = link.get("gen"), link.get("width")
    if gen is None or width is None:
        return None
    try:
        return pcie_gbps(int(gen), int(width))
    except InputError:
        return None


def _nvlink_link_gbps(topology: Mapping[str, Any] | None) -> float:
    speeds: list[float] = []
    for g in (topology or {}).get("gpus") or []:
        links = g.get("nvlinks")
        if isinstance(links, Mapping):
            speeds += [float(v) for v in links.values() if isinstance(v, (int, float)) and v > 0]
    return statistics.median(speeds) if speeds else NVLINK4_LINK_GBPS


def _nv_count(label: str | None) -> int | None:
    if label and label.startswith("NV") and label[2:].isdigit():
        return int(label[2:])
    return None


def worst_gpu_label(topology: Mapping[str, Any] | None) -> str | None:
    """The worst GPU-GPU path label of the topology (NV# best, SYS worst)."""
    order = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5, "NET": 6}
    labels = [str(p.get("label")) for p in _gpu_pairs(topology) if p.get("label")]
    if not labels:
        return None

    def badness(label: str) -> tuple[int, int]:
        n = _nv_count(label)
        return (0, -n) if n is not None else (order.get(label, 7), 0)

    return max(labels, key=badness)


def row_path(row: Mapping[str, Any], topology: Mapping[str, Any] | None) -> str | None:
    path = row.get("path")
    if isinstance(path, str) and path:
        return path
    if row.get("kind") == "collective":
        return worst_gpu_label(topology)
    if row.get("kind") == "copy" and row.get("op") == "p2p":
        pair = _pair(topology, row.get("src"), row.get("dst"))
        return str(pair["label"]) if pair and pair.get("label") else None
    return None


def expected_gbps(
    row: Mapping[str, Any], topology: Mapping[str, Any] | None
) -> tuple[float | None, str]:
    """The line rate the row's path should reach, and where that figure came from."""
    given = row.get("expected_gbps")
    if isinstance(given, (int, float)) and not math.isnan(given) and given > 0:
        return float(given), "expected_gbps of the row"
    kind, op = row.get("kind"), row.get("op")
    if kind == "copy" and op in ("h2d", "d2h"):
        gpu_name = row.get("dst") if op == "h2d" else row.get("src")
        gpu = _gpu(topology, gpu_name)
        rate = pcie_line_rate(gpu)
        if rate is not None:
            link = (gpu or {}).get("pcie") or {}
            return rate, f"PCIe Gen{link.get('gen')} x{link.get('width')}"
        return None, "no PCIe link of " + str(gpu_name) + " in the topology"
    label = row_path(row, topology)
    n = _nv_count(label)
    if n is not None:
        per_link = _nvlink_link_gbps(topology)
        return n * per_link, f"{label}: {n} x {per_link:.2f} GB/s"
    if label in ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC"):
        if kind == "copy":
            names = [row.get("src"), row.get("dst")]
        else:
            names = [g.get("name") for g in (topology or {}).get("gpus") or []]
        rates = [pcie_line_rate(_gpu(topology, n)) for n in names]
        known = [r for r in rates if r is not None]
        if known and len(known) == len(rates):
            return min(known), f"{label}: slowest PCIe link of the GPUs"
        return None, f"{label}: PCIe links of the GPUs not in the topology"
    return None, "path unknown" if label is None else f"no line rate for path {label}"


# -- subjects -------------------------------------------------------------------------------


def subject_of(
    row: Mapping[str, Any], per: str, multi_host: bool, multi_build: bool = False
) -> str:
    """Who a row is about: a GPU, a pair (``GPU0->GPU1``), a node; ``build/`` in front
    when the rows hold more than one build (they are never pooled)."""
    subject = _subject(row, per, multi_host)
    return f"{row.get('build')}/{subject}" if multi_build else subject


def _subject(row: Mapping[str, Any], per: str, multi_host: bool) -> str:
    kind, op = row.get("kind"), row.get("op")
    host = row.get("host") if isinstance(row.get("host"), str) else None
    node = host or (str(row.get("build")) if row.get("build") is not None else "-")
    if per == "auto":
        per = ("pair" if op == "p2p" else "gpu") if kind == "copy" else "node"
    if per == "all":
        return "all"
    if per == "node":
        return node
    src, dst = row.get("src"), row.get("dst")
    if per == "gpu":
        if kind == "copy":
            gpu = dst if op == "h2d" else src
        else:
            gpu = src if isinstance(src, str) else None
        name = str(gpu) if gpu else "-"
    else:
        name = f"{src}->{dst}" if src or dst else "-"
    return f"{node}:{name}" if multi_host else name


# -- evaluation -----------------------------------------------------------------------------


def evaluate(
    frame: pd.DataFrame,
    spec: Mapping[str, Any],
    topology: Mapping[str, Any] | None = None,
    baseline: pd.DataFrame | None = None,
) -> Verdict:
    """Check ``frame`` (normalised rows, see store.normalize) against the rule set."""
    rules, default_outlier = load_rules(spec)
    verdict = Verdict(rules=rules)
    hosts = {h for h in frame["host"].dropna()} if "host" in frame.columns else set()
    multi_host = len(hosts) > 1
    multi_build = frame["build"].dropna().nunique() > 1
    for rule_id, rule in rules.items():
        check = rule["check"]
        desc = str(rule.get("description") or rule_id)
        if check in ("min", "max"):
            lines = _threshold_rule(
                rule_id, rule, frame, topology, baseline, multi_host, default_outlier, multi_build
            )
        elif check == "no_wrong":
            lines = _no_wrong(rule_id, rule, frame)
        elif check == "status_ok":
            lines = _status_ok(rule_id, rule, frame)
        elif check == "pcie_link":
            lines = _pcie_link(rule_id, rule, topology)
        else:
            lines = _p2p_status(rule_id, rule, topology)
        for line in lines:
            line.description = desc
        verdict.checks.extend(lines)
    return verdict


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "?"
    text = f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"
    return f"{text} {unit}".strip()


def _pct(margin: float) -> str:
    return f"{abs(margin) * 100:.1f}%"


def _applicable(
    rule: Mapping[str, Any], frame: pd.DataFrame, topology: Mapping[str, Any] | None
) -> pd.DataFrame:
    rows = select_rows(frame, rule.get("select") or {})
    paths = rule.get("paths")
    if paths and len(rows):
        pats = _values(paths)
        keep = [_match(row_path(r, topology), pats) for r in records(rows)]
        rows = rows.loc[pd.Series(keep, index=rows.index, dtype=bool)]
    return rows


def _threshold_rule(
    rule_id: str,
    rule: Mapping[str, Any],
    frame: pd.DataFrame,
    topology: Mapping[str, Any] | None,
    baseline: pd.DataFrame | None,
    multi_host: bool,
    default_outlier: float | None,
    multi_build: bool = False,
) -> list[Check]:
    metric = str(rule["metric"])
    if metric not in frame.columns:
        raise InputError(f"rules.checks.{rule_id}.metric: {metric!r} is not a row column")
    unit = METRIC_UNITS.get(metric, ("", True))[0]
    rows = _applicable(rule, frame, topology)
    rows = rows[(rows["status"] == "ok") & rows[metric].notna()]
    if rows.empty:
        status = FAIL if rule.get("required") else SKIP
        why = "no rows match" + (
            f" (paths {', '.join(_values(rule['paths']))})" if rule.get("paths") else ""
        )
        return [Check(rule_id, status, "rows", "-", why, unit=unit)]
    per = str(rule.get("per", "auto"))
    recs_all = records(rows)
    kind = str(recs_all[0].get("kind"))
    keys = key_frame(rows, kind) if kind in FIGURE_KEYS else pd.DataFrame(index=rows.index)
    # One value per (figure, subject): the median over repeats.
    cells: dict[tuple[tuple[str, ...], str], list[dict[str, Any]]] = {}
    for rec, row_key in zip(recs_all, keys.itertuples(index=False), strict=False):
        subject = subject_of(rec, per, multi_host, multi_build)
        cells.setdefault((tuple(row_key), subject), []).append(rec)
    bases: list[tuple[str, float, str]] = []
    is_min = rule["check"] == "min"
    if is_min and rule.get("min") is not None:
        bases.append(("absolute", float(rule["min"]), ""))
    if not is_min and rule.get("max") is not None:
        bases.append(("absolute", float(rule["max"]), ""))
    if is_min and rule.get("min_fraction_of_expected") is not None:
        bases.append(("expected", float(rule["min_fraction_of_expected"]), ""))
    frac_base = (
        rule.get("min_fraction_of_baseline") if is_min else rule.get("max_fraction_of_baseline")
    )
    if frac_base is not None:
        bases.append(("baseline", float(frac_base), ""))
    base_index = (
        _baseline_index(baseline, kind, metric, per, multi_host) if baseline is not None else None
    )

    out: list[Check] = []
    # Per basis and subject: the worst figure decides.
    for basis, amount, _ in bases:
        if basis == "baseline" and base_index is None:
            out.append(
                Check(
                    rule_id,
                    SKIP,
                    basis,
                    "-",
                    "no baseline given (accept --baseline RUN)",
                    unit=unit,
                )
            )
            continue
        worst: dict[str, Check] = {}
        for (key, subject), recs in cells.items():
            value = float(statistics.median(float(r[metric]) for r in recs))
            fig = str(recs[0].get("figure"))
            if basis == "absolute":
                threshold, how = (
                    amount,
                    ("at least " if is_min else "at most ") + _fmt(amount, unit),
                )
            else:
                if basis == "expected":
                    ref, src = expected_gbps(recs[0], topology)
                    missing = f"expected bandwidth unknown ({src})"
                    of = f"{_fmt(ref, 'GB/s')} ({src})"
                else:
                    assert base_index is not None
                    ref = base_index.get((key, subject))
                    if ref is None and multi_build:
                        ref = base_index.get((key, subject.split("/", 1)[1]))
                    if ref is None:
                        ref = base_index.get((key, "*"))
                    missing = "not in the baseline"
                    of = f"baseline {_fmt(ref, unit)}"
                if ref is None:
                    worst.setdefault(
                        subject,
                        Check(
                            rule_id,
                            SKIP,
                            basis,
                            subject,
                            f"{fig}: {missing}",
                            figure=fig,
                            value=value,
                            unit=unit,
                        ),
                    )
                    continue
                threshold = amount * ref
                how = f"{amount:g} x {of}"
            margin = (value - threshold) / threshold if threshold else 0.0
            ok = value >= threshold if is_min else value <= threshold
            if not is_min:
                margin = -margin
            if ok:
                msg = f"{fig}: {_fmt(value, unit)} {'>=' if is_min else '<='} {_fmt(threshold, unit)} ({how})"
            else:
                msg = (
                    f"{fig}: {_fmt(value, unit)} is {_pct(margin)} {'below' if is_min else 'above'} "
                    f"{_fmt(threshold, unit)} ({how})"
                )
            c = Check(
                rule_id,
                PASS if ok else FAIL,
                basis,
                subject,
                msg,
                figure=fig,
                value=value,
                threshold=threshold,
                unit=unit,
                margin=margin,
            )
            prev = worst.get(subject)
            if (
                prev is None
                or prev.status == SKIP
                or (prev.margin is not None and margin < prev.margin)
            ):
                worst[subject] = c
        out.extend(worst[s] for s in sorted(worst))

    fraction = rule.get("outlier_fraction", default_outlier)
    if fraction is not None and fraction is not False:
        out.extend(_outliers(rule_id, cells, metric, unit, float(fraction), is_min, multi_build))
    if not out:
        out.append(
            Check(
                rule_id, SKIP, "rows", "-", "rule has no threshold and no outlier check", unit=unit
            )
        )
    return out


def _baseline_index(
    baseline: pd.DataFrame, kind: str, metric: str, per: str, multi_host: bool
) -> dict[tuple[tuple[str, ...], str], float]:
    rows = baseline[
        (baseline["kind"] == kind) & (baseline["status"] == "ok") & baseline[metric].notna()
    ]
    index: dict[tuple[tuple[str, ...], str], float] = {}
    if rows.empty:
        return index
    keys = key_frame(rows, kind)
    groups: dict[tuple[tuple[str, ...], str], list[float]] = {}
    for rec, key in zip(records(rows), keys.itertuples(index=False), strict=False):
        value = float(rec[metric])
        groups.setdefault((tuple(key), subject_of(rec, per, multi_host)), []).append(value)
        groups.setdefault((tuple(key), "*"), []).append(value)
    return {k: float(statistics.median(v)) for k, v in groups.items()}


def _outliers(
    rule_id: str,
    cells: Mapping[tuple[tuple[str, ...], str], list[dict[str, Any]]],
    metric: str,
    unit: str,
    fraction: float,
    higher_is_better: bool,
    multi_build: bool = False,
) -> list[Check]:
    # Peers are the same figure in the same build (builds are compared by `compare`).
    by_figure: dict[tuple[str, ...], dict[str, float]] = {}
    figures: dict[tuple[str, ...], str] = {}
    for (fkey, subject), recs in cells.items():
        key = (*fkey, subject.split("/", 1)[0] if multi_build else "")
        by_figure.setdefault(key, {})[subject] = float(
            statistics.median(float(r[metric]) for r in recs)
        )
        figures[key] = str(recs[0].get("figure"))
    worst: dict[str, Check] = {}
    for key, values in by_figure.items():
        if len(values) < 2:
            continue
        for subject, value in values.items():
            peers = [v for s, v in values.items() if s != subject]
            med = float(statistics.median(peers))
            if med == 0:
                continue
            margin = (value - med) / med if higher_is_better else (med - value) / med
            bad = margin < -fraction
            fig = figures[key]
            direction = "below" if higher_is_better else "above"
            msg = (
                f"{fig}: {_fmt(value, unit)} is {_pct(margin)} {direction} the median of its "
                f"{len(peers)} peer(s), {_fmt(med, unit)} (limit {fraction:.0%})"
                if bad
                else f"{subject} {fig}: {_fmt(value, unit)}, peers {_fmt(med, unit)}"
            )
            c = Check(
                rule_id,
                FAIL if bad else PASS,
                "outlier",
                subject,
                msg,
                figure=fig,
                value=value,
                threshold=med * (1 - fraction) if higher_is_better else med * (1 + fraction),
                unit=unit,
                margin=margin,
            )
            prev = worst.get(subject)
            if prev is None or (prev.margin is not None and margin < prev.margin):
                worst[subject] = c
    if not worst:
        return []
    failed = [worst[s] for s in sorted(worst) if worst[s].status == FAIL]
    if failed:
        return failed
    # No outlier: one line for the rule, naming the subject closest to the limit.
    closest = min(worst.values(), key=lambda c: c.margin if c.margin is not None else 0.0)
    closest.subject = f"all {len(worst)}"
    closest.message = (
        f"no outlier among {len(worst)}: all within {fraction:.0%} of their peers' median; "
        f"lowest {closest.message}"
    )
    return [closest]


def _no_wrong(rule_id: str, rule: Mapping[str, Any], frame: pd.DataFrame) -> list[Check]:
    rows = select_rows(frame, rule.get("select") or {})
    checked = rows[rows["wrong"].notna()]
    if checked.empty:
        status = FAIL if rule.get("required") else SKIP
        return [Check(rule_id, status, "rows", "-", "no row was checked for wrong results")]
    bad = checked[checked["wrong"] > 0]
    if bad.empty:
        return [
            Check(
                rule_id,
                PASS,
                "rows",
                "-",
                f"{len(checked)} checked rows, no wrong elements",
                value=0.0,
                threshold=0.0,
            )
        ]
    out = []
    for subject, group in bad.groupby(bad["host"].fillna(bad["build"]).astype(str), sort=True):
        figs = ", ".join(
            f"{r['figure']} ({int(r['wrong'])} wrong)" for r in group.head(5).to_dict("records")
        )
        more = f" and {len(group) - 5} more" if len(group) > 5 else ""
        out.append(
            Check(
                rule_id,
                FAIL,
                "rows",
                str(subject),
                f"wrong results in {len(group)} row(s): {figs}{more}",
                figure=str(group["figure"].iloc[0]),
                value=float(group["wrong"].sum()),
                threshold=0.0,
            )
        )
    return out


def _status_ok(rule_id: str, rule: Mapping[str, Any], frame: pd.DataFrame) -> list[Check]:
    rows = select_rows(frame, rule.get("select") or {})
    if rows.empty:
        status = FAIL if rule.get("required") else SKIP
        return [Check(rule_id, status, "rows", "-", "no rows")]
    bad = rows[rows["status"] != "ok"]
    if bad.empty:
        return [Check(rule_id, PASS, "rows", "-", f"all {len(rows)} rows ok")]
    out = []
    for subject, group in bad.groupby(bad["host"].fillna(bad["build"]).astype(str), sort=True):
        first = group.iloc[0]
        out.append(
            Check(
                rule_id,
                FAIL,
                "rows",
                str(subject),
                f"{len(group)} row(s) not ok; first: {first['kind']} {first['op']}: {first['status']}: {first['error']}",
                figure=str(first["figure"]),
            )
        )
    return out


def _link_text(link: Mapping[str, Any], maxed: bool = False) -> str:
    g = link.get("gen_max" if maxed else "gen")
    w = link.get("width_max" if maxed else "width")
    return f"Gen{g if g is not None else '?'} x{w if w is not None else '?'}"


def _no_topology(rule_id: str, rule: Mapping[str, Any]) -> Check:
    """A topology rule with no topology to read: a failure only where the rule requires it."""
    status = FAIL if rule.get("required") else SKIP
    return Check(
        rule_id,
        status,
        "topology",
        "-",
        "no topology (accept topology=FILE from `gpulane topo --json`)",
    )


def _pcie_link(
    rule_id: str, rule: Mapping[str, Any], topology: Mapping[str, Any] | None
) -> list[Check]:
    if not topology:
        return [_no_topology(rule_id, rule)]
    out: list[Check] = []
    devices: list[tuple[str, Mapping[str, Any] | None]] = []
    for g in topology.get("gpus") or []:
        devices.append((str(g.get("name")), g.get("pcie")))
        if rule.get("include_upstream", True):
            for up in g.get("pcie_upstream") or []:
                devices.append(
                    (
                        f"{g.get('name')} upstream {up.get('bus_id') or up.get('device') or ''}".strip(),
                        up,
                    )
                )
    for name, link in devices:
        if not link:
            out.append(Check(rule_id, SKIP, "topology", name, "PCIe link unknown"))
            continue
        gen, gen_max, width, width_max = (
            link.get(k) for k in ("gen", "gen_max", "width", "width_max")
        )
        known = (gen is not None and gen_max is not None) or (
            width is not None and width_max is not None
        )
        down = link.get("downtrained") is True
        if gen is not None and gen_max is not None and int(gen) < int(gen_max):
            down = True
        if width is not None and width_max is not None and int(width) < int(width_max):
            down = True
        if down:
            margin = None
            if width and width_max and gen and gen_max:
                try:
                    margin = (
                        pcie_gbps(int(gen), int(width)) / pcie_gbps(int(gen_max), int(width_max))
                        - 1
                    )
                except InputError:
                    margin = None
            out.append(
                Check(
                    rule_id,
                    FAIL,
                    "topology",
                    name,
                    f"PCIe link at {_link_text(link)}, capable of {_link_text(link, True)} (downtrained)",
                    margin=margin,
                )
            )
        elif not known:
            out.append(Check(rule_id, SKIP, "topology", name, "PCIe generation and width unknown"))
        else:
            out.append(
                Check(
                    rule_id,
                    PASS,
                    "topology",
                    name,
                    f"PCIe link at {_link_text(link)} (its maximum)",
                )
            )
    if not out:
        out.append(Check(rule_id, SKIP, "topology", "-", "no GPUs in the topology"))
    return out


def _p2p_status(
    rule_id: str, rule: Mapping[str, Any], topology: Mapping[str, Any] | None
) -> list[Check]:
    if not topology:
        return [_no_topology(rule_id, rule)]
    modes = _values(rule["modes"]) if rule.get("modes") else None
    pairs = _gpu_pairs(topology)
    if not pairs:
        return [Check(rule_id, SKIP, "topology", "-", "no GPU pairs in the topology")]
    out = []
    for p in pairs:
        subject = f"{p.get('a')}-{p.get('b')}"
        raw = p.get("p2p")
        modes_status: dict[str, Any] = {"any": raw} if isinstance(raw, str) else dict(raw or {})
        if not modes_status:
            out.append(
                Check(
                    rule_id,
                    SKIP,
                    "topology",
                    subject,
                    "P2P status unknown (needs nvidia-smi topo -p2p or NVML)",
                )
            )
            continue
        items = {
            str(k): str(v) for k, v in modes_status.items() if modes is None or str(k) in modes
        }
        bad = {k: v for k, v in items.items() if v.upper() != "OK"}
        if not items:
            out.append(
                Check(
                    rule_id,
                    SKIP,
                    "topology",
                    subject,
                    f"P2P status for mode(s) {', '.join(modes or [])} unknown",
                )
            )
        elif bad:
            out.append(
                Check(
                    rule_id,
                    FAIL,
                    "topology",
                    subject,
                    "P2P not OK: " + ", ".join(f"{k}={v}" for k, v in sorted(bad.items())),
                )
            )
        else:
            out.append(
                Check(
                    rule_id, PASS, "topology", subject, "P2P OK (" + ", ".join(sorted(items)) + ")"
                )
            )
    return out


def merge_rule_sets(sets: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Later rule sets override earlier ones rule by rule (tests, programmatic use)."""
    out: dict[str, Any] = {"checks": {}}
    for s in sets:
        for k, v in s.items():
            if k == "checks":
                out["checks"].update(v or {})
            else:
                out[k] = v
    return out
