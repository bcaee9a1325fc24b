"""`gpulane accept`: the acceptance suite, the rule check and its outputs.

The suite runs gpulane's own commands as subprocesses into one group directory
(``<results_dir>/<run_id>/``): ``gpulane topo --json`` (-> ``topology.json``),
``gpulane sweep`` (collectives up to 1 GiB on GPUs) and ``gpulane copy``, each writing its
run directory of rows beneath the group. ``run=DIR`` skips measuring and checks rows
that exist. Either way the rows are checked against the rule set (``rules`` group) and
the result is written beside them: ``accept.json``, ``junit.xml``, ``report.html``.

Exit status (docs/accept.md): 0 PASS, 1 FAIL (a check failed), 2 bad input, 3 INCOMPLETE
(a check the rule set requires on this kind of machine did not run, and was not allowed
to skip with ``--allow-skip RULE``; or nothing passed at all).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gpulane.analysis.report import render_report
from gpulane.analysis.report.accept_json import read_accept
from gpulane.analysis.rules import FAIL, Check, Verdict, evaluate, load_rules
from gpulane.analysis.rules.evaluate import check_allow_skip
from gpulane.analysis.rules.model import VERDICT_FAIL, VERDICT_INCOMPLETE
from gpulane.analysis.rules.ranks import without_one_rank
from gpulane.analysis.store import load_frame
from gpulane.campaigns.accept.campaign_checks import campaign_checks
from gpulane.campaigns.accept.expect import (
    accept_device,
    expected_gpus,
    gpu_checks,
    stored_rows_checks,
)
from gpulane.campaigns.accept.findings import accept_doctor, findings_json
from gpulane.campaigns.accept.inputs import (
    baselines_dir,
    refuse_a_log,
    resolve_baseline,
    resolve_topology,
    store_baseline,
)
from gpulane.campaigns.accept.localize import localize_checks, mode_of
from gpulane.campaigns.accept.output import junit_xml, print_verdict
from gpulane.campaigns.accept.p2p_trust import accept_p2p_trust
from gpulane.campaigns.accept.suite import Step, gpu_count, run_suite, step_checks
from gpulane.config.commands import AcceptConfig
from gpulane.errors import InputError, RunFailed
from gpulane.rundir import make_run_dir, save_config
from gpulane.session.output import Say, stdout

ACCEPT_JSON = "accept.json"
JUNIT_XML = "junit.xml"
REPORT_HTML = "report.html"
# A required check did not run: neither a pass (0) nor a fault of the machine (1) nor bad
# input (2).
INCOMPLETE_EXIT = 3
EXIT_STATUS = {VERDICT_FAIL: RunFailed.exit_code, VERDICT_INCOMPLETE: INCOMPLETE_EXIT}


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
    # wall seconds per phase of this accept (suite, doctor, rules, localize, report, total)
    seconds: dict[str, float] = field(default_factory=dict)


def accept(cfg: AcceptConfig, say: Say = stdout) -> int:
    outcome = run_accept(cfg, say)
    print_verdict(outcome.verdict, str(cfg.format), say)
    if str(cfg.format) != "json":
        from gpulane.analysis.reference import reference_lines

        shown = without_one_rank(outcome.frame)  # 1-rank collectives: no figure of a link
        for line in reference_lines(shown, str(cfg.results_dir or "runs")):
            say(line)
    if outcome.findings and str(cfg.format) != "json":
        worst = outcome.findings[0]
        say(
            f"# doctor: {len(outcome.findings)} finding(s), first: [{worst['severity']}] "
            f'{worst["title"]} (accept.json "findings")'
        )
    if outcome.seconds and str(cfg.format) != "json":
        parts = ", ".join(f"{k} {v:g}" for k, v in outcome.seconds.items())
        say(f"# accept: seconds: {parts}")
    for name, path in outcome.files.items():
        say(f"# {name}: {path}")
    if outcome.stored_baseline is not None:
        say(f"# baseline stored: {outcome.stored_baseline}")
    elif cfg.save_baseline:
        say(
            f"# baseline {cfg.save_baseline!r} not stored: the verdict is "
            f"{outcome.verdict.status}, and a baseline is a run that passed"
        )
    return EXIT_STATUS.get(outcome.verdict.status, 0)


def fresh_out(out: Path) -> Path:
    """``out``, or where it already holds an earlier accept's verdict, the first
    ``out/accept-N`` (N = 2, 3, ...) that holds none: an accept never writes over another."""
    if not (out / ACCEPT_JSON).exists():
        return out
    n = 2
    while (out / f"accept-{n}" / ACCEPT_JSON).exists():
        n += 1
    return out / f"accept-{n}"


def _out_dir(cfg: AcceptConfig, default: Path, say: Say = stdout) -> Path:
    first = Path(str(cfg.out)) if cfg.out else default
    out = fresh_out(first)
    if out != first:
        say(f"# accept: {first / ACCEPT_JSON} holds an earlier accept's verdict; this one: {out}")
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


def _rules_spec(cfg: AcceptConfig) -> dict[str, Any]:
    if cfg.rules_file:
        from gpulane.campaigns.accept.rules_input import load_rules_file

        return load_rules_file(str(cfg.rules_file))
    raw_rules = cfg.rules
    if not isinstance(raw_rules, dict):
        raise InputError("rules: expected a rule set (rules=default, nvlink, pcie or a YAML file)")
    return {str(k): v for k, v in raw_rules.items()}


@dataclass
class _Inputs:
    """What ``run_accept`` reads before anything is measured (so bad input costs nothing)."""

    rules_spec: dict[str, Any]
    allow_skip: list[str]
    base_root: Path
    baseline: Any
    baseline_src: str | None
    device: str
    expected: Any
    given: Any  # (topology, source) where topology= names one, else None (read later)


@dataclass
class _Rows:
    """Where the rows come from: run=DIR, or the suite just run into a fresh group."""

    paths: list[Path]
    default_out: Path
    build: str | None = None
    steps: list[Step] = field(default_factory=list)
    gpus: int = 0


def run_accept(cfg: AcceptConfig, say: Say = stdout) -> Outcome:
    clock = _Clock()
    inputs = _read_inputs(cfg)
    rows = _gather_rows(cfg, inputs.device, clock, say)
    try:
        frame = load_frame(rows.paths)
    except InputError:
        if not rows.steps:
            raise
        frame = load_frame([])
    topology, topology_src = inputs.given or resolve_topology(cfg.topology, rows.paths)
    clock.lap("read")
    doctor = accept_doctor(cfg.doctor, rows.paths, not cfg.run, rows.gpus, topology, topology_src)
    found = findings_json(doctor)
    clock.lap("doctor")
    verdict = _judge(cfg, inputs, rows, frame, topology, found, doctor is not None)
    clock.lap("rules")
    if rows.steps and not cfg.run:  # measured here: a failed node-level collective is localized
        named, step = localize_checks(
            cfg, rows.paths[0], str(rows.build), verdict.checks, topology, found["findings"],
            rows.gpus, say,
        )  # fmt: skip
        verdict.checks += named
        rows.steps += [step] if step is not None else []
        clock.lap("localize")
    if frame.empty:
        verdict.checks.insert(
            0,
            Check("suite", FAIL, "rows", "-", "no rows to check", description="rows were measured"),
        )
    out = _out_dir(cfg, rows.default_out, say)
    outcome = Outcome(
        verdict, frame, out, steps=rows.steps, baseline=inputs.baseline_src,
        findings=found["findings"],
    )  # fmt: skip
    meta = _meta(verdict, frame, inputs, rows, topology_src)
    (out / ACCEPT_JSON).write_text(
        json.dumps({**meta, **verdict.to_dict(), **found}, indent=1, default=str),
        encoding="utf-8",
    )
    outcome.files["accept.json"] = out / ACCEPT_JSON
    _write_junit_html(cfg, outcome, inputs, rows, topology, topology_src, str(meta["build"]))
    if outcome.files.get("report"):
        clock.lap("report")
    name = cfg.save_baseline if verdict.passed else None
    if name:
        _save_baseline(outcome, inputs, rows, topology, str(name), str(meta["build"]))
        clock.lap("baseline")
    outcome.seconds = clock.done()
    # beside the verdict, for the record (benchmarks/accept): where an accept's time went
    doc = json.loads((out / ACCEPT_JSON).read_text(encoding="utf-8"))
    doc["seconds"] = outcome.seconds
    (out / ACCEPT_JSON).write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    return outcome


def _read_inputs(cfg: AcceptConfig) -> _Inputs:
    """Every input that can be wrong, read and checked before anything is measured."""
    rules_spec = _rules_spec(cfg)
    load_rules(rules_spec)  # a bad rule is an input error before anything is measured
    allow_skip = check_allow_skip(list(cfg.allow_skip or []), rules_spec)
    if cfg.save_baseline is not None and (
        not str(cfg.save_baseline).strip() or "/" in str(cfg.save_baseline)
    ):
        raise InputError(
            f"save_baseline: {cfg.save_baseline!r}: expected a name (no /); it is stored "
            "under <results_dir>/baselines"
        )
    base_root = baselines_dir(cfg.results_dir, cfg.run)
    baseline, baseline_src = resolve_baseline(cfg.baseline, base_root)
    mode_of(cfg)  # so is a bad suite.localize or suite.localize_pattern
    device = accept_device(cfg.device)
    expected = expected_gpus(cfg.gpus, rules_spec)
    # A topology given (a file, live) is read now: bad input before anything is measured.
    # Only topology=auto waits for the rows, to find the topology.json beside them.
    given = None if str(cfg.topology or "auto") == "auto" else resolve_topology(cfg.topology, [])
    if cfg.run is not None and not str(cfg.run).strip():
        raise InputError(
            "run: empty; give a run directory or rows file (or leave run out to measure)"
        )
    return _Inputs(
        rules_spec, allow_skip, base_root, baseline, baseline_src, device, expected, given
    )


def _gather_rows(cfg: AcceptConfig, device: str, clock: _Clock, say: Say) -> _Rows:
    """run=DIR: the rows there; else the suite, run now into a fresh group directory."""
    if cfg.run:
        target = Path(str(cfg.run))
        if not target.exists():
            raise InputError(f"run: {target}: no such run directory or rows file")
        refuse_a_log(target, cfg.results_dir)
        # a rows file's verdict goes into the results directory, not beside the file
        results = Path(str(cfg.results_dir or "runs"))
        default_out = target if target.is_dir() else results / f"{target.parent.name}-accept"
        return _Rows([target], default_out)
    gpus = 0 if device == "cpu" else gpu_count()
    run = make_run_dir(cfg)
    save_config(cfg, run, gpus=gpus, kind="accept")
    say(f"# gpulane accept: build {run.build}, {gpus} GPU(s), group {run.path}")
    clock.lap("setup")  # the rules read, the GPUs counted (NVML, else torch), the group
    steps = run_suite(cfg, run.path, run.build, gpus, say)
    clock.lap("suite")
    return _Rows([run.path], run.path, run.build, steps, gpus)


def _judge(
    cfg: AcceptConfig,
    inputs: _Inputs,
    rows: _Rows,
    frame: pd.DataFrame,
    topology: Any,
    found: dict[str, Any],
    with_doctor: bool,
) -> Verdict:
    """The rule set over the rows, with the GPU count, the steps and the campaign checks."""
    evidence: dict[str, Any] = {"doctor": found["findings"]} if with_doctor else {}
    trust = accept_p2p_trust(inputs.rules_spec, rows.gpus) if not cfg.run else None
    if trust is not None:  # a p2p_trust rule: each GPU pair's collective, here and now
        evidence["p2p_trust"] = trust
    verdict = evaluate(
        frame,
        inputs.rules_spec,
        topology,
        inputs.baseline,
        evidence=evidence or None,
        gpus=rows.gpus if not cfg.run else None,
        allow_skip=inputs.allow_skip,
    )
    groups = [p for p in rows.paths if p.is_dir()]
    campaign = [c for g in groups for c in campaign_checks(g)]
    if any(c.status == FAIL for c in campaign):
        for s in rows.steps:
            if s.name == "sweep" and s.rc == RunFailed.exit_code and not s.note:
                s.note = "the cluster campaign named what the campaign lines say"
    counted, no_gpus = (
        gpu_checks(inputs.expected, rows.gpus, inputs.device)
        if not cfg.run
        else ([], stored_rows_checks(frame, inputs.device))
    )
    verdict.checks[:0] = counted + step_checks(rows.steps, rows.gpus) + campaign
    verdict.missing[:0] = no_gpus
    return verdict


def _meta(
    verdict: Verdict, frame: pd.DataFrame, inputs: _Inputs, rows: _Rows, topology_src: Any
) -> dict[str, Any]:
    """accept.json's fields beside the verdict's: where the rows, rules and baseline came from."""
    return {
        "verdict": verdict.status,
        "passed": verdict.passed,
        "build": rows.build or ", ".join(sorted({str(b) for b in frame["build"].dropna()})),
        "rows_from": [str(p) for p in rows.paths],
        "rules": inputs.rules_spec,
        "topology": topology_src,
        "baseline": inputs.baseline_src,
        "steps": [
            {"name": s.name, "command": s.command, "rc": s.rc, "note": s.note, "seconds": s.seconds}
            for s in rows.steps
        ],
    }


def _write_junit_html(
    cfg: AcceptConfig,
    outcome: Outcome,
    inputs: _Inputs,
    rows: _Rows,
    topology: Any,
    topology_src: Any,
    build: str,
) -> None:
    """junit.xml and report.html where asked for (true: beside accept.json; else a path)."""
    out, verdict, frame = outcome.out_dir, outcome.verdict, outcome.frame
    if cfg.junit:
        path = out / JUNIT_XML if cfg.junit is True else Path(str(cfg.junit))
        path.write_text(junit_xml(verdict), encoding="utf-8")
        outcome.files["junit"] = path
    if not cfg.html:
        return
    path = out / REPORT_HTML if cfg.html is True else Path(str(cfg.html))
    title = f"gpulane accept: {build} ({verdict.status})"
    path.write_text(
        render_report(
            without_one_rank(frame),  # said once in the verdict; no link's figure
            topology,
            verdict,
            title=title,
            sources=[str(p) for p in rows.paths],
            topology_source=topology_src,
            rule_set=_rule_set_name(cfg),
            baseline=inputs.baseline,
            # the doctor's findings as accept.json (just written) holds them
            findings=read_accept(out / ACCEPT_JSON, "accept").findings,
            baseline_source=inputs.baseline_src,
        ),
        encoding="utf-8",
    )
    outcome.files["report"] = path


def _save_baseline(
    outcome: Outcome, inputs: _Inputs, rows: _Rows, topology: Any, name: str, build: str
) -> None:
    """A passing run's rows and topology, stored as the baseline ``name`` for later runs."""
    frame = outcome.frame
    dirs = sorted({Path(d) for d in frame["run_dir"].dropna().unique()}) if len(frame) else []
    outcome.stored_baseline = store_baseline(
        dirs,
        topology,
        inputs.base_root / name,
        {"name": name, "from": [str(p) for p in rows.paths], "passed": outcome.verdict.passed,
         "build": build},
    )  # fmt: skip


class _Clock:
    """Wall seconds per phase: lap(name) closes the phase that ran since the last lap."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(self.laps.get(name, 0.0) + now - self.last, 1)
        self.last = now

    def done(self) -> dict[str, float]:
        return {**self.laps, "total": round(time.monotonic() - self.start, 1)}


def _rule_set_name(cfg: AcceptConfig) -> str | None:
    try:
        from hydra.core.hydra_config import HydraConfig

        choices = HydraConfig.get().runtime.choices
        return str(choices.get("rules")) if choices.get("rules") else None
    except Exception:
        return None
