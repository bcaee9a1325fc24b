"""The acceptance suite: gpulane's own commands run as subprocesses into one group.

``gpulane topo --json`` first (-> ``topology.json``: the sweep labels paths from it), then
``gpulane sweep``, ``gpulane copy`` and (when asked) ``gpulane tokens``, each writing its
run directory of rows beneath the group. Each step is a :class:`Check` line of its own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.analysis.rules import FAIL, PASS, Check
from gpulane.analysis.store import TOPOLOGY_FILE
from gpulane.config.capabilities import as_launcher
from gpulane.config.commands import AcceptConfig
from gpulane.config.launcher import LocalLauncherConfig
from gpulane.rundir import run_env
from gpulane.topology.model import Topology


@dataclass
class Step:
    name: str
    command: list[str]
    rc: int | None = None
    note: str = ""


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


def hydra_value(value: Any) -> str:
    """A value as a Hydra override reads it back (strings quoted where they need it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_./:@-]+", text) and text not in ("null", "true", "false"):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def launcher_overrides(launcher: Any) -> list[str]:
    """``launcher=NAME`` and every ``launcher.KEY=VALUE`` of the accept configuration, for
    the sweep (nothing for the sweep's own default, the local launcher as it comes). A
    free mapping (sbatch_args) goes whole; a settings group (container) key by key."""
    if launcher is None or as_launcher(launcher) == LocalLauncherConfig():
        return []
    from omegaconf import DictConfig, OmegaConf

    node = launcher if isinstance(launcher, DictConfig) else OmegaConf.structured(launcher)
    out = [f"launcher={launcher.name}"]

    def walk(prefix: str, cfg: DictConfig) -> None:
        for raw in cfg:
            key = str(raw)
            if key == "name" and prefix == "launcher":
                continue
            value = cfg[key]
            if isinstance(value, DictConfig) and OmegaConf.get_type(value) is not dict:
                walk(f"{prefix}.{key}", value)
            else:
                plain = OmegaConf.to_container(value) if isinstance(value, DictConfig) else value
                if not isinstance(plain, (str, int, float, bool, type(None), dict)):
                    plain = list(plain)
                out.append(f"{prefix}.{key}={hydra_value(plain)}")

    walk("launcher", node)
    return out


def suite_steps(cfg: AcceptConfig, group: Path, build: str, gpus: int) -> list[Step]:
    """The commands of the suite, in order (topology first: the sweep labels paths from it)."""
    suite = cfg.suite
    common = [
        f"results_dir={group}",
        f"build={build}",
        "progress=false",
        f"timeout_s={cfg.timeout_s}",
    ]
    env = [f"++env.{k}={v}" for k, v in (cfg.env or {}).items()]
    steps: list[Step] = []
    if _want(suite.topo, gpus):
        steps.append(Step("topo", [*_gpulane(), "topo", "--json", *_list(suite.topo_args)]))
    if _want(suite.sweep, gpus):
        size_max = str(suite.sizes_max)
        if size_max == "auto":
            size_max = "1G" if gpus > 0 else "32M"
        collectives = ",".join(_list(suite.collectives))
        cmd = [*_gpulane(), "sweep", *common, f"collectives=[{collectives}]"]
        cmd += [f"sizes.min={suite.sizes_min}", f"sizes.max={size_max}"]
        preset = cfg.preset
        if preset is not None and preset.name not in (None, "none"):
            cmd.append(f"preset={preset.name}")
        cmd += launcher_overrides(cfg.launcher)
        steps.append(Step("sweep", cmd + env + _list(suite.sweep_overrides)))
    if _want(suite.copy, gpus):
        steps.append(Step("copy", [*_gpulane(), "copy", *common, *_list(suite.copy_overrides)]))
    if _want(suite.tokens, gpus):
        steps.append(
            Step("tokens", [*_gpulane(), "tokens", *common, *env, *_list(suite.tokens_overrides)])
        )
    return steps


def run_suite(cfg: AcceptConfig, group: Path, build: str, gpus: int) -> list[Step]:
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
            (group / TOPOLOGY_FILE).write_text(
                json.dumps(live.to_json(), indent=1), encoding="utf-8"
            )
    return steps


def _last_line(text: str | None) -> str:
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return lines[-1] if lines else ""


def probe_live_topology() -> Topology | None:
    """This machine's topology through gpulane.topology.live, or None when unavailable."""
    try:
        from gpulane.topology.live import probe_topology
    except ImportError:
        return None
    try:
        return probe_topology()
    except Exception:
        return None


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
