"""`gpulane accept`'s localization step: when a node-level collective check fails (or
``suite.localize=always``), the same collective is measured on subsets of the node's GPUs
(``gpulane sweep localize=<suite.localize_pattern>`` into ``<group>/localize``, through the
same launcher as the suite's sweep) and each GPU or pair it names is a check of its own,
with the figures and the evidence for those GPUs beside it. A healthy node costs nothing:
with ``suite.localize=auto`` nothing runs unless a check failed; ``never`` turns it off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpulane.analysis.rules import FAIL, SKIP, Check
from gpulane.campaigns.accept.suite import Step, hydra_value, launcher_overrides
from gpulane.campaigns.localize.evidence import beside, gpu_words
from gpulane.campaigns.localize.plan import check_pattern
from gpulane.campaigns.localize.rank import LOCALIZE_FILE, OPS
from gpulane.errors import InputError
from gpulane.rundir import run_env
from gpulane.session.output import Say, stdout
from gpulane.topology.model import Topology

RULE = "localize"
MODES = ("auto", "always", "never")
DESCRIPTION = "the GPU or GPU pair a failed node-level collective comes from"


def failed_collective(checks: list[Check]) -> Check | None:
    """The first failed check on a collective figure (all_reduce busbw and the like)."""
    for c in checks:
        text = f"{c.rule} {c.figure or ''}"
        if c.status == FAIL and any(op in text for op in OPS):
            return c
    return None


def mode_of(cfg: Any) -> tuple[str, str]:
    suite = cfg.suite
    mode = str(getattr(suite, "localize", "auto")).strip().lower()
    if mode in ("true", "yes"):
        mode = "always"
    if mode in ("false", "no", "off", "none"):
        mode = "never"
    if mode not in MODES:
        raise InputError(f"suite.localize: expected one of {', '.join(MODES)}, got {mode!r}")
    return mode, check_pattern(str(getattr(suite, "localize_pattern", "pairs")))


def localize_command(cfg: Any, group: Path, build: str, op: str, gpus: int) -> list[str]:
    suite = cfg.suite
    size = str(suite.sizes_max)
    if size == "auto":
        size = "1G" if gpus > 0 else "32M"
    _mode, pattern = mode_of(cfg)
    env = [f"++env.{k}={v}" for k, v in (cfg.env or {}).items()]
    overrides = [
        *[str(o) for o in suite.sweep_overrides or []],
        *[str(o) for o in getattr(suite, "localize_overrides", None) or []],
    ]
    # what torch.distributed adds per call: a figure no rule reads (as the suite's sweep)
    quiet = (
        [] if any(o.startswith("torch_overhead=") for o in overrides) else ["torch_overhead=false"]
    )
    return [
        sys.executable,
        "-m",
        "gpulane",
        "sweep",
        f"results_dir={group / 'localize'}",
        f"build={build}",
        "progress=false",
        f"timeout_s={cfg.timeout_s}",
        f"collectives=[{op}]",
        f"sizes.min={hydra_value(size)}",
        f"sizes.max={hydra_value(size)}",
        f"localize={pattern}",
        *_preset(cfg),
        *launcher_overrides(cfg.launcher),
        *env,
        *quiet,
        *overrides,
    ]


def _preset(cfg: Any) -> list[str]:
    """The suite's preset (NCCL's switches for a build), as its sweep got it."""
    preset = getattr(cfg, "preset", None)
    name = getattr(preset, "name", None) if preset is not None else None
    return [f"preset={name}"] if name not in (None, "none") else []


def localize_checks(
    cfg: Any,
    group: Path,
    build: str,
    checks: list[Check],
    topology: Topology | None,
    findings: list[dict[str, Any]],
    gpus: int,
    say: Say = stdout,
) -> tuple[list[Check], Step | None]:
    """Run the localization when it is due; its checks and the step it ran (or none)."""
    mode, _ = mode_of(cfg)
    failed = failed_collective(checks)
    if mode == "never" or (mode == "auto" and failed is None):
        return [], None
    if gpus == 1:  # a search among GPUs cannot apply to one: neither passed nor failed
        return [
            Check(
                RULE,
                SKIP,
                "localize",
                failed.subject if failed else "-",
                "not applicable: localization needs at least 2 GPUs, got 1",
                description=DESCRIPTION,
            )
        ], None
    if _nodes(cfg.launcher) > 1:
        # Across nodes the campaign (pairs, halving, ring of nodes) names the node; the
        # search inside a node runs on that one node (accept on it, or launcher.nodes=1).
        if mode == "auto":
            return [], None
        return [
            Check(
                RULE,
                SKIP,
                "localize",
                "-",
                "localization inside a node runs on one node; this suite ran on "
                f"{_nodes(cfg.launcher)} (the campaign's own checks name a node)",
                description=DESCRIPTION,
            )
        ], None
    op = next(
        (o for o in OPS if failed is not None and o in f"{failed.rule} {failed.figure}"), None
    )
    op = op or next((str(c) for c in cfg.suite.collectives if str(c) in OPS), "all_reduce")
    cmd = localize_command(cfg, group, build, op, gpus)
    if failed is not None:
        cmd.append("localize_node_failed=true")
    step = Step("localize", cmd)
    why = f"{failed.rule} failed on {failed.subject}" if failed else "suite.localize=always"
    say(f"# accept: localize ({why}): {' '.join(cmd[3:])}")
    child_env = {**os.environ, **run_env(cfg)}
    if gpus:
        child_env.setdefault("NCCL_NVLS_ENABLE", "0")
    proc = subprocess.run(cmd, env=child_env, stderr=subprocess.PIPE, text=True)
    step.rc = proc.returncode
    if proc.stderr:
        sys.stderr.write(proc.stderr)
        step.note = (proc.stderr.strip().splitlines() or [""])[-1]
    say(f"# accept: localize exited {step.rc}")
    found = _read(group / "localize")
    if found is None:
        return [
            Check(
                RULE,
                FAIL if failed is not None else SKIP,
                "rows",
                failed.subject if failed else "-",
                f"localization did not finish ({step.note or f'exit {step.rc}'}); "
                "nothing was named",
                description=DESCRIPTION,
            )
        ], step
    states = gpu_words([group / "localize", *_run_dirs(group)])
    return verdict_lines(found, failed, topology, states, findings), step


def _nodes(launcher: Any) -> int:
    """How many nodes the suite's launcher places ranks on (1 for local; a hostfile's
    hosts are not counted here: mpirun with a hostfile counts as several)."""
    if launcher is None:
        return 1
    if getattr(launcher, "hostfile", None):
        return 2
    try:
        return max(1, int(getattr(launcher, "nodes", 1) or 1))
    except (TypeError, ValueError):
        return 1


def _run_dirs(group: Path) -> list[Path]:
    return [p.parent for p in group.rglob("gpu_state.json")]


def _read(folder: Path) -> dict[str, Any] | None:
    files = sorted(folder.rglob(LOCALIZE_FILE)) if folder.exists() else []
    if not files:
        return None
    try:
        data: dict[str, Any] = json.loads(files[-1].read_text())
    except ValueError:
        return None
    return data


def _pair_label(topology: Topology | None, a: str, b: str) -> str:
    pair = topology.pair(a, b) if topology is not None else None
    return f" ({pair.label})" if pair is not None and pair.label else ""


def verdict_lines(
    found: dict[str, Any],
    failed: Check | None,
    topology: Topology | None,
    states: dict[str, str],
    findings: list[dict[str, Any]],
) -> list[Check]:
    """One check per GPU or pair named, with its figures and the evidence beside it."""
    result = (found.get("results") or [{}])[0]
    op = str(found.get("op", "all_reduce"))
    steps = [(list(s["subset"]), float(s["figure_gbps"])) for s in result.get("steps") or []]
    ref = result.get("reference_gbps")
    head = ""
    if failed is not None:
        short = f" {failed.margin:+.0%}" if failed.margin is not None else ""
        head = f"{failed.figure or failed.rule}{short} on {failed.subject}; "
    out = []
    named: list[tuple[str, list[str]]] = [(g, [g]) for g in result.get("gpus") or []]
    named += [(f"{a}-{b}", [a, b]) for a, b in result.get("pairs") or []]
    named += [("+".join(s), list(s)) for s in result.get("sets") or []]
    for subject, members in named:
        label = _pair_label(topology, members[0], members[1]) if len(members) == 2 else ""
        with_it = [f for s, f in steps if set(members) <= set(s) and len(s) < len(result["units"])]
        without = [f for s, f in steps if not set(members) & set(s) and len(s) > 1]
        figures = (
            f"{op} with {subject}: {min(with_it):.4g} GB/s, without: {max(without):.4g} GB/s"
            if with_it and without
            else (f"reference {ref:.4g} GB/s" if ref else "")
        )
        why = beside(members, states, findings)
        text = f"{head}localized to {'pair ' if len(members) == 2 else ''}{subject}{label}"
        text += f" ({result.get('pattern')}: {figures})" if figures else ""
        text += f"; {why}" if why else ""
        out.append(Check(RULE, FAIL, "localize", subject, text, description=DESCRIPTION))
    if not out:
        words = result.get("note") or "no GPU or pair is slower than the others"
        why = "; ".join(v for v in states.values())
        out.append(
            Check(
                RULE,
                SKIP,
                "localize",
                failed.subject if failed else "-",
                f"{head}{result.get('pattern')} localization named no GPU or pair ({words})"
                + (f"; {why}" if why else ""),
                description=DESCRIPTION,
            )
        )
    return out
