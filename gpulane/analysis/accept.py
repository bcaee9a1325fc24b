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
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from gpulane.analysis.report import render_report
from gpulane.analysis.rules import FAIL, PASS, SKIP, Check, Verdict, evaluate, load_rules
from gpulane.analysis.store import (
    BASELINES_DIR,
    TOPOLOGY_FILE,
    find_topology,
    load_frame,
    load_topology,
)
from gpulane.errors import InputError, RunFailed
from gpulane.record import ROWS_JSONL, RowWriter, write_parquet
from gpulane.rundir import make_run_dir, run_env, save_config

ACCEPT_JSON = "accept.json"
JUNIT_XML = "junit.xml"
REPORT_HTML = "report.html"


@dataclass
class Step:
    name: str
    command: list[str]
    rc: int | None = None
    note: str = ""


@dataclass
class Outcome:
    verdict: Verdict
    frame: pd.DataFrame
    out_dir: Path
    files: dict[str, Path] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    baseline: str | None = None
    stored_baseline: Path | None = None


# -- GPUs and the suite -----------------------------------------------------------------------


def gpu_count() -> int:
    """GPUs this process can see (NVML first, torch second), 0 when none or unknown."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return 0
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        pass
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:
        return 0


def _gpulane() -> list[str]:
    return [sys.executable, "-m", "gpulane.cli"]


def _want(value: Any, gpus: int) -> bool:
    """auto: when a GPU is visible; otherwise true/false (also as text)."""
    text = str(value).strip().lower()
    if text == "auto":
        return gpus > 0
    return text not in ("false", "0", "no", "off", "none", "null", "")


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def suite_steps(cfg: Any, group: Path, build: str, gpus: int) -> list[Step]:
    """The commands of the suite, in order (topology first: the sweep labels paths from it)."""
    suite = cfg.suite
    common = [
        f"results_dir={group}",
        f"build={build}",
        "progress=false",
        f"timeout_s={cfg.timeout_s}",
    ]
    env = [f"++env.{k}={v}" for k, v in (cfg.get("env") or {}).items()]
    steps: list[Step] = []
    if _want(suite["topo"], gpus):
        steps.append(Step("topo", [*_gpulane(), "topo", "--json", *_list(suite["topo_args"])]))
    if _want(suite["sweep"], gpus):
        size_max = str(suite["sizes_max"])
        if size_max == "auto":
            size_max = "1G" if gpus > 0 else "32M"
        collectives = ",".join(_list(suite["collectives"]))
        cmd = [*_gpulane(), "sweep", *common, f"collectives=[{collectives}]"]
        cmd += [f"sizes.min={suite['sizes_min']}", f"sizes.max={size_max}"]
        preset = cfg.get("preset")
        if preset is not None and preset.get("name") not in (None, "none"):
            cmd.append(f"preset={preset.name}")
        steps.append(Step("sweep", cmd + env + _list(suite["sweep_overrides"])))
    if _want(suite["copy"], gpus):
        steps.append(Step("copy", [*_gpulane(), "copy", *common, *_list(suite["copy_overrides"])]))
    if _want(suite["tokens"], gpus):
        steps.append(
            Step(
                "tokens", [*_gpulane(), "tokens", *common, *env, *_list(suite["tokens_overrides"])]
            )
        )
    return steps


def run_suite(cfg: Any, group: Path, build: str, gpus: int) -> list[Step]:
    steps = suite_steps(cfg, group, build, gpus)
    child_env = {**os.environ, **run_env(cfg)}
    if gpus:
        child_env.setdefault("NCCL_NVLS_ENABLE", "0")
    for step in steps:
        print(f"# accept: {step.name}: {' '.join(step.command[2:])}", flush=True)
        try:
            if step.name == "topo":
                proc = subprocess.run(step.command, env=child_env, capture_output=True, text=True)
                step.rc = proc.returncode
                if proc.returncode == 0 and proc.stdout.strip():
                    (group / TOPOLOGY_FILE).write_text(proc.stdout, encoding="utf-8")
                else:
                    step.note = _last_line(proc.stderr) or "no output"
            else:
                proc = subprocess.run(
                    step.command, env=child_env, stderr=subprocess.PIPE, text=True
                )
                step.rc = proc.returncode
                if proc.stderr:
                    sys.stderr.write(proc.stderr)
                    step.note = _last_line(proc.stderr)
        except OSError as err:
            step.rc, step.note = 127, str(err)
        print(
            f"# accept: {step.name} exited {step.rc}" + (f": {step.note}" if step.rc else ""),
            flush=True,
        )
    if gpus and not (group / TOPOLOGY_FILE).exists():
        live = probe_live_topology()
        if live is not None:
            (group / TOPOLOGY_FILE).write_text(json.dumps(live, indent=1), encoding="utf-8")
    return steps


def _last_line(text: str | None) -> str:
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return lines[-1] if lines else ""


def probe_live_topology() -> dict[str, Any] | None:
    """This machine's topology through gpulane.topology.live, or None when unavailable."""
    try:
        from gpulane.topology.live import probe_topology  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    try:
        data = probe_topology().to_json()
    except Exception:
        return None
    return data if isinstance(data, dict) else None


def step_checks(steps: list[Step]) -> list[Check]:
    out = []
    for s in steps:
        if s.rc == 0:
            out.append(
                Check(
                    "suite",
                    PASS,
                    "run",
                    s.name,
                    f"gpulane {s.name} finished",
                    description="every suite step finished",
                )
            )
        else:
            out.append(
                Check(
                    "suite",
                    FAIL,
                    "run",
                    s.name,
                    f"gpulane {s.name} exited {s.rc}: {s.note or 'see its output'}",
                    description="every suite step finished",
                )
            )
    return out


# -- topology and baseline --------------------------------------------------------------------


def resolve_topology(value: Any, paths: list[Path]) -> tuple[dict[str, Any] | None, str | None]:
    text = "auto" if value is None else str(value)
    if text in ("none", "null", "false", "off"):
        return None, None
    if text == "auto":
        found = find_topology(paths)
        return (load_topology(found), str(found)) if found else (None, None)
    if text == "live":
        live = probe_live_topology()
        if live is None:
            raise InputError(
                "topology=live: the live probe (gpulane.topology.live, NVML) is not available here"
            )
        return live, "live probe"
    return load_topology(text), text


def resolve_baseline(
    value: Any, results_dir: Path
) -> tuple[pd.DataFrame | None, str | None, str | None]:
    """(rows, where from, name to store as) for baseline=VALUE."""
    if value is None or str(value) == "":
        return None, None, None
    text = str(value)
    p = Path(text)
    if p.exists():
        return load_frame([p]), str(p), None
    named = results_dir / BASELINES_DIR / text
    if named.exists():
        return load_frame([named]), str(named), None
    if "/" in text or text.startswith("."):
        raise InputError(f"baseline: {text}: no such run directory")
    return None, None, text


def store_baseline(
    frame_dirs: list[Path], topology: dict[str, Any] | None, dest: Path, meta: dict[str, Any]
) -> Path:
    """Copy the rows (and topology) of a run into ``dest`` as a baseline."""
    tmp = dest.with_name(dest.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    with RowWriter(tmp) as w:
        for d in frame_dirs:
            src = d / ROWS_JSONL
            if src.exists():
                from gpulane.record import read_rows

                for row in read_rows(src):
                    w.write(row)
            elif (d / "rows.parquet").exists():
                from gpulane.record import read_parquet

                for row in read_parquet(d / "rows.parquet").to_dict("records"):
                    w.write(row)
    write_parquet(tmp)
    if topology is not None:
        (tmp / TOPOLOGY_FILE).write_text(json.dumps(topology, indent=1), encoding="utf-8")
    (tmp / "baseline.json").write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return dest


# -- outputs ------------------------------------------------------------------------------------


def junit_xml(verdict: Verdict, name: str = "gpulane accept") -> str:
    counts = verdict.counts()
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(verdict.checks)),
        failures=str(counts[FAIL]),
        skipped=str(counts[SKIP]),
        errors="0",
    )
    for c in verdict.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"gpulane.accept.{c.rule}",
            name=f"{c.basis} {c.subject}".strip(),
        )
        if c.status == FAIL:
            failure = ET.SubElement(case, "failure", message=c.message, type=c.basis)
            failure.text = f"{c.description}\n{c.message}"
        elif c.status == SKIP:
            ET.SubElement(case, "skipped", message=c.message)
        else:
            out = ET.SubElement(case, "system-out")
            out.text = c.message
    suites = ET.Element(
        "testsuites", name=name, tests=suite.get("tests", "0"), failures=suite.get("failures", "0")
    )
    suites.append(suite)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


def verdict_table(verdict: Verdict, all_lines: bool = True) -> pd.DataFrame:
    order = {FAIL: 0, PASS: 1, SKIP: 2}
    checks = sorted(verdict.checks, key=lambda c: order.get(c.status, 3))
    rows = []
    for c in checks:
        if not all_lines and c.status == SKIP:
            continue
        rows.append(
            {
                "status": c.status.upper(),
                "rule": c.rule,
                "on": c.subject,
                "basis": c.basis,
                "by": f"{c.margin * 100:+.1f}%" if c.margin is not None else "",
                "detail": c.message,
            }
        )
    return pd.DataFrame(rows, columns=["status", "rule", "on", "basis", "by", "detail"])


def print_verdict(verdict: Verdict, fmt: str) -> None:
    table = verdict_table(verdict)
    counts = verdict.counts()
    summary = (
        f"accept: {'PASS' if verdict.passed else 'FAIL'}: {counts[PASS]} passed, {counts[FAIL]} failed, "
        f"{counts[SKIP]} skipped"
        + (f"; failed rules: {', '.join(verdict.failed_rules())}" if not verdict.passed else "")
    )
    if fmt == "json":
        print(json.dumps(verdict.to_dict(), indent=1, default=str))
        return
    if fmt == "markdown":
        from gpulane.analysis.compare import markdown_table

        print(markdown_table(table))
        print(f"**{summary}**")
        return
    if fmt == "table":
        from rich.console import Console
        from rich.table import Table

        console = Console(soft_wrap=False)
        if not console.is_terminal:
            console = Console(soft_wrap=False, width=200)
        t = Table(title="gpulane accept", show_lines=False)
        styles = {"FAIL": "bold red", "PASS": "green", "SKIP": "dim"}
        for col in table.columns:
            t.add_column(col, overflow="fold", justify="right" if col == "by" else "left")
        for row in table.itertuples(index=False):
            t.add_row(*[str(v) for v in row], style=styles.get(row[0], ""))
        console.print(t)
    print(summary)


# -- the task -------------------------------------------------------------------------------------


def accept(cfg: DictConfig) -> int:
    outcome = run_accept(cfg)
    print_verdict(outcome.verdict, str(cfg.format))
    for name, path in outcome.files.items():
        print(f"# {name}: {path}")
    if outcome.stored_baseline is not None:
        print(f"# baseline stored: {outcome.stored_baseline}")
    return 0 if outcome.verdict.passed else RunFailed.exit_code


def _out_dir(cfg: Any, default: Path) -> Path:
    out = Path(str(cfg.out)) if cfg.get("out") else default
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


def run_accept(cfg: DictConfig) -> Outcome:
    results_dir = Path(str(cfg.get("results_dir") or "runs"))
    raw_rules = OmegaConf.to_container(cfg.rules, resolve=True)
    if not isinstance(raw_rules, dict):
        raise InputError("rules: expected a rule set (rules=default, nvlink or pcie)")
    rules_spec: dict[str, Any] = {str(k): v for k, v in raw_rules.items()}
    load_rules(rules_spec)  # a bad rule is an input error before anything is measured
    baseline, baseline_src, store_as = resolve_baseline(cfg.get("baseline"), results_dir)
    steps: list[Step] = []
    if cfg.get("run"):
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
    topology, topology_src = resolve_topology(cfg.get("topology"), paths)
    verdict = evaluate(frame, rules_spec, topology, baseline)
    verdict.checks[:0] = step_checks(steps)
    if frame.empty:
        verdict.checks.insert(
            0,
            Check("suite", FAIL, "rows", "-", "no rows to check", description="rows were measured"),
        )
    out = _out_dir(cfg, default_out)
    outcome = Outcome(verdict, frame, out, steps=steps, baseline=baseline_src)
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
        json.dumps({**meta, **verdict.to_dict()}, indent=1, default=str), encoding="utf-8"
    )
    outcome.files["accept.json"] = out / ACCEPT_JSON
    if cfg.get("junit"):
        path = out / JUNIT_XML if cfg.junit is True else Path(str(cfg.junit))
        path.write_text(junit_xml(verdict), encoding="utf-8")
        outcome.files["junit"] = path
    if cfg.get("html"):
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
            ),
            encoding="utf-8",
        )
        outcome.files["report"] = path
    name = cfg.get("save_baseline") or (store_as if verdict.passed else None)
    if store_as and not verdict.passed and not cfg.get("save_baseline"):
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


def _rule_set_name(cfg: Any) -> str | None:
    try:
        from hydra.core.hydra_config import HydraConfig

        choices = HydraConfig.get().runtime.choices
        return str(choices.get("rules")) if choices.get("rules") else None
    except Exception:
        return None
