"""`gpulane accept`: the acceptance suite, the rule check and its outputs.

The suite runs gpulane's own commands as subprocesses into one group directory
(``<results_dir>/<run_id>/``): ``gpulane topo --json`` (-> ``topology.json``),
``gpulane sweep`` (collectives up to 1 GiB on GPUs) and ``gpulane copy``, each writing its
run directory of rows beneath the group. ``run=DIR`` skips measuring and checks rows
that exist. Either way the rows are checked against the rule set (``rules`` group) and
the result is written beside them: ``accept.json``, ``junit.xml``, ``report.html``.

Exit status: 0 when every rule passes, 1 when one fails, 2 for bad input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gpulane.analysis.report import render_report
from gpulane.analysis.report.accept_json import read_accept
from gpulane.analysis.rules import FAIL, Check, Verdict, evaluate, load_rules
from gpulane.analysis.store import BASELINES_DIR, load_frame
from gpulane.campaigns.accept.campaign_checks import campaign_checks
from gpulane.campaigns.accept.findings import accept_doctor, findings_json
from gpulane.campaigns.accept.inputs import resolve_baseline, resolve_topology, store_baseline
from gpulane.campaigns.accept.localize import localize_checks, mode_of
from gpulane.campaigns.accept.output import junit_xml, print_verdict
from gpulane.campaigns.accept.suite import Step, gpu_count, run_suite, step_checks
from gpulane.config.commands import AcceptConfig
from gpulane.errors import InputError, RunFailed
from gpulane.rundir import make_run_dir, save_config

ACCEPT_JSON = "accept.json"
JUNIT_XML = "junit.xml"
REPORT_HTML = "report.html"


@dataclass
class Outcome:
    verdict: Verdict
    frame: pd.DataFrame
    out_dir: Path
    files: dict[str, Path] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    baseline: str | None = None
    stored_baseline: Path | None = None
    # gpulane doctor's findings ({severity, check, title, evidence, why, fix, subject})
    findings: list[dict[str, Any]] = field(default_factory=list)


def accept(cfg: AcceptConfig) -> int:
    outcome = run_accept(cfg)
    print_verdict(outcome.verdict, str(cfg.format))
    if outcome.findings and str(cfg.format) != "json":
        worst = outcome.findings[0]
        print(
            f"# doctor: {len(outcome.findings)} finding(s), first: [{worst['severity']}] "
            f'{worst["title"]} (accept.json "findings")'
        )
    for name, path in outcome.files.items():
        print(f"# {name}: {path}")
    if outcome.stored_baseline is not None:
        print(f"# baseline stored: {outcome.stored_baseline}")
    return 0 if outcome.verdict.passed else RunFailed.exit_code


def _out_dir(cfg: AcceptConfig, default: Path) -> Path:
    out = Path(str(cfg.out)) if cfg.out else default
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".writable"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise InputError(
            f"out: cannot write to {out}: {err.strerror or err}; choose another with out=PATH"
        ) from err
    return out


def run_accept(cfg: AcceptConfig) -> Outcome:
    results_dir = Path(str(cfg.results_dir or "runs"))
    raw_rules = cfg.rules
    if not isinstance(raw_rules, dict):
        raise InputError("rules: expected a rule set (rules=default, nvlink or pcie)")
    rules_spec: dict[str, Any] = {str(k): v for k, v in raw_rules.items()}
    load_rules(rules_spec)  # a bad rule is an input error before anything is measured
    mode_of(cfg)  # so is a bad suite.localize or suite.localize_pattern
    baseline, baseline_src, store_as = resolve_baseline(cfg.baseline, results_dir)
    # A topology given (a file, live) is read now: bad input before anything is measured.
    # Only topology=auto waits for the rows, to find the topology.json beside them.
    given = None if str(cfg.topology or "auto") == "auto" else resolve_topology(cfg.topology, [])
    steps: list[Step] = []
    gpus = 0
    if cfg.run:
        target = Path(str(cfg.run))
        if not target.exists():
            raise InputError(f"run: {target}: no such run directory or rows file")
        paths = [target]
        default_out = target if target.is_dir() else target.parent
        build = None
    else:
        gpus = gpu_count()
        run = make_run_dir(cfg)
        save_config(cfg, run, gpus=gpus, kind="accept")
        build = run.build
        print(f"# gpulane accept: build {build}, {gpus} GPU(s), group {run.path}", flush=True)
        steps = run_suite(cfg, run.path, build, gpus)
        paths = [run.path]
        default_out = run.path
    try:
        frame = load_frame(paths)
    except InputError:
        if not steps:
            raise
        frame = load_frame([])
    topology, topology_src = given or resolve_topology(cfg.topology, paths)
    doctor = accept_doctor(cfg.doctor, paths, not cfg.run, gpus, topology, topology_src)
    found = findings_json(doctor)
    verdict = evaluate(
        frame,
        rules_spec,
        topology,
        baseline,
        evidence={"doctor": found["findings"]} if doctor is not None else None,
    )
    groups = [p for p in paths if p.is_dir()]
    campaign = [c for g in groups for c in campaign_checks(g)]
    if any(c.status == FAIL for c in campaign):
        for s in steps:
            if s.name == "sweep" and s.rc == RunFailed.exit_code and not s.note:
                s.note = "the cluster campaign named what the campaign lines say"
    verdict.checks[:0] = step_checks(steps) + campaign
    if steps and not cfg.run:  # measured here: a failed node-level collective is localized
        named, step = localize_checks(
            cfg, paths[0], str(build), verdict.checks, topology, found["findings"], gpus
        )
        verdict.checks += named
        steps += [step] if step is not None else []
    if frame.empty:
        verdict.checks.insert(
            0,
            Check("suite", FAIL, "rows", "-", "no rows to check", description="rows were measured"),
        )
    out = _out_dir(cfg, default_out)
    outcome = Outcome(
        verdict, frame, out, steps=steps, baseline=baseline_src, findings=found["findings"]
    )
    meta = {
        "passed": verdict.passed,
        "build": build or ", ".join(sorted({str(b) for b in frame["build"].dropna()})),
        "rows_from": [str(p) for p in paths],
        "rules": rules_spec,
        "topology": topology_src,
        "baseline": baseline_src,
        "steps": [
            {"name": s.name, "command": s.command, "rc": s.rc, "note": s.note} for s in steps
        ],
    }
    (out / ACCEPT_JSON).write_text(
        json.dumps({**meta, **verdict.to_dict(), **found}, indent=1, default=str),
        encoding="utf-8",
    )
    outcome.files["accept.json"] = out / ACCEPT_JSON
    if cfg.junit:
        path = out / JUNIT_XML if cfg.junit is True else Path(str(cfg.junit))
        path.write_text(junit_xml(verdict), encoding="utf-8")
        outcome.files["junit"] = path
    if cfg.html:
        path = out / REPORT_HTML if cfg.html is True else Path(str(cfg.html))
        title = f"gpulane accept: {meta['build']} ({'PASS' if verdict.passed else 'FAIL'})"
        path.write_text(
            render_report(
                frame,
                topology,
                verdict,
                title=title,
                sources=[str(p) for p in paths],
                topology_source=topology_src,
                rule_set=_rule_set_name(cfg),
                baseline=baseline,
                # the doctor's findings as accept.json (just written) holds them
                findings=read_accept(out / ACCEPT_JSON, "accept").findings,
                baseline_source=baseline_src,
            ),
            encoding="utf-8",
        )
        outcome.files["report"] = path
    name = cfg.save_baseline or (store_as if verdict.passed else None)
    if store_as and not verdict.passed and not cfg.save_baseline:
        print(
            f"# baseline {store_as!r} not stored: this run failed (force with save_baseline={store_as})"
        )
    if name:
        dirs = sorted({Path(d) for d in frame["run_dir"].dropna().unique()}) if len(frame) else []
        outcome.stored_baseline = store_baseline(
            dirs,
            topology,
            results_dir / BASELINES_DIR / str(name),
            {
                "name": str(name),
                "from": [str(p) for p in paths],
                "passed": verdict.passed,
                "build": meta["build"],
            },
        )
    return outcome


def _rule_set_name(cfg: AcceptConfig) -> str | None:
    try:
        from hydra.core.hydra_config import HydraConfig

        choices = HydraConfig.get().runtime.choices
        return str(choices.get("rules")) if choices.get("rules") else None
    except Exception:
        return None
