"""The acceptance suite: gpulane's own commands run as subprocesses into one group.

``gpulane topo --json`` (-> ``topology.json``), ``gpulane sweep``, ``gpulane copy`` and
(when asked) ``gpulane tokens``, each writing its run directory of rows beneath the group.
Each step is a :class:`Check` line of its own, with the seconds it took.

The topology probe only reads (NVML, nvidia-smi, lspci, sysfs) and the sweep labels its
paths itself, so the probe runs beside the sweep's start-up (its ranks' imports and NCCL's
set-up, about 7 s on 4 GPUs, longer than the probe) instead of before it: the accept on
4x H200 took 77 s with the two in turn. The copy and tokens steps wait for both: they
measure the GPUs and read the topology.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.analysis.rules import FAIL, PASS, SKIP, Check
from gpulane.analysis.store import TOPOLOGY_FILE
from gpulane.config.capabilities import as_launcher
from gpulane.config.commands import AcceptConfig
from gpulane.config.launcher import LocalLauncherConfig
from gpulane.rundir import run_env
from gpulane.session.output import Say, stdout
from gpulane.session.world import gpu_driver_present
from gpulane.topology.model import Topology


@dataclass
class Step:
    name: str
    command: list[str]
    rc: int | None = None
    note: str = ""
    seconds: float | None = None  # wall time from its start to its exit


# The environment variable through which the suite's copy step reads the topology the
# topo step probed (gpulane.transfers.gpuinfo), instead of probing the machine again.
TOPOLOGY_ENV = "GPULANE_TOPOLOGY_FILE"
# Run beside the sweep (read-only probes); every other step runs alone, in order.
BESIDE_SWEEP = ("topo",)


def gpu_count() -> int:
    """GPUs this process can see (NVML first, torch second), 0 when none or unknown."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "" or not gpu_driver_present():
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
    return [sys.executable, "-m", "gpulane"]


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
    if _want(suite.sweep, gpus) and not one_gpu_only(gpus, _list(suite.sweep_overrides)):
        size_max = str(suite.sizes_max)
        if size_max == "auto":
            size_max = "1G" if gpus > 0 else "32M"
        collectives = ",".join(_list(suite.collectives))
        cmd = [*_gpulane(), "sweep", *common, f"collectives=[{collectives}]"]
        cmd += [f"sizes.min={suite.sizes_min}", f"sizes.max={size_max}"]
        if str(getattr(cfg, "device", "auto")) == "cpu":  # a CPU node, accepted knowingly
            cmd.append("device=cpu")
        if not any(str(o).startswith("torch_overhead=") for o in _list(suite.sweep_overrides)):
            # what torch.distributed adds per call is a figure for the reader, not one any
            # rule checks: a second NCCL communicator and six timed loops (2-4 s) saved
            cmd.append("torch_overhead=false")
        preset = cfg.preset
        if preset is not None and preset.name not in (None, "none"):
            cmd.append(f"preset={preset.name}")
        cmd += launcher_overrides(cfg.launcher)
        steps.append(Step("sweep", cmd + env + _list(suite.sweep_overrides)))
    if _want(suite.copy, gpus):
        copy_args = _list(suite.copy_overrides)
        # copy-bandwidth.png: the report draws the same rows (1-2 s of matplotlib saved)
        quiet = [] if any(o.startswith("plot=") for o in copy_args) else ["plot=false"]
        steps.append(Step("copy", [*_gpulane(), "copy", *common, *quiet, *copy_args]))
    if _want(suite.tokens, gpus):
        steps.append(
            Step("tokens", [*_gpulane(), "tokens", *common, *env, *_list(suite.tokens_overrides)])
        )
    return steps


# The one line a 1-GPU accept says about collectives, in place of 1-rank rows
ONE_GPU = "collectives need 2+ ranks: not measured on 1 GPU"


def one_gpu_only(gpus: int, sweep_overrides: list[str]) -> bool:
    """One GPU and no ranks= of the user's: the sweep would time 1-rank collectives, whose
    bus bandwidth is 0 by definition (nothing crosses a link), so it does not run."""
    return gpus == 1 and not any(str(o).startswith(("ranks=", "device=")) for o in sweep_overrides)


def beside_sweep(steps: list[Step]) -> list[Step]:
    """The steps that start with the sweep and run beside it: the read-only probe, where
    there is a sweep (a probe asked to load the GPUs, topo --under-load, runs alone: the
    sweep would measure its copies)."""
    if not any(s.name == "sweep" for s in steps):
        return []
    return [s for s in steps if s.name in BESIDE_SWEEP and "--under-load" not in s.command]


def _import_ahead() -> None:
    """What accept itself imports after the suite, imported while the suite's steps run:
    torch for the doctor's load check, matplotlib for the report (seconds of the accept's
    own time otherwise; the steps run in processes of their own)."""
    for module in ("torch", "matplotlib.figure"):
        # one that fails is named by the doctor or the report, later
        with contextlib.suppress(Exception):
            importlib.import_module(module)


def run_suite(
    cfg: AcceptConfig, group: Path, build: str, gpus: int, say: Say = stdout
) -> list[Step]:
    steps = suite_steps(cfg, group, build, gpus)
    if gpus:
        threading.Thread(target=_import_ahead, daemon=True).start()
    child_env = {**os.environ, **run_env(cfg)}
    if gpus:
        child_env.setdefault("NCCL_NVLS_ENABLE", "0")
    beside = beside_sweep(steps)
    started: dict[str, _Running] = {}
    for step in steps:
        if step in beside:  # started with the sweep, below
            continue
        if step.name == "sweep":
            for other in beside:  # the probe starts first and runs beside the sweep
                started[other.name] = _Running(other, child_env, group, say)
        if step.name not in started:
            started[step.name] = _Running(step, child_env, group, say)
        _finish(step, started[step.name], group, say)
        if step.name == "sweep":
            for other in beside:
                _finish(other, started[other.name], group, say)
        if step.name in ("sweep", "topo") and (group / TOPOLOGY_FILE).exists():
            child_env[TOPOLOGY_ENV] = str(group / TOPOLOGY_FILE)
    if gpus and not (group / TOPOLOGY_FILE).exists():
        live = probe_live_topology()
        if live is not None:
            (group / TOPOLOGY_FILE).write_text(
                json.dumps(live.to_json(), indent=1), encoding="utf-8"
            )
    return steps


class _Running:
    """A started step: its process read to the end by a thread of its own, so that a step
    run beside another gets its own seconds (from its start to its exit)."""

    def __init__(self, step: Step, env: dict[str, str], group: Path, say: Say = stdout) -> None:
        say(f"# accept: {step.name}: {' '.join(step.command[2:])}")
        self.t0 = time.monotonic()
        self.ended = self.t0
        self.stderr = ""
        self.proc: subprocess.Popen[str] | None = None
        # topo prints its JSON (kept, through a file); the others print their tables,
        # passed through; stderr gives a failed step's last line
        try:
            with _stdout_of(step, group) as out:
                self.proc = subprocess.Popen(
                    step.command, env=env, stdout=out, stderr=subprocess.PIPE, text=True
                )
        except OSError as err:
            step.rc, step.note = 127, str(err)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        if self.proc is not None:
            _, self.stderr = self.proc.communicate()
        self.ended = time.monotonic()

    def wait(self) -> tuple[int | None, str, float]:
        """(exit status, stderr, seconds)"""
        self.reader.join()
        rc = self.proc.returncode if self.proc is not None else None
        return rc, self.stderr or "", round(self.ended - self.t0, 1)


def _stdout_of(step: Step, group: Path) -> Any:
    if step.name == "topo":
        return open(group / (TOPOLOGY_FILE + ".part"), "w", encoding="utf-8")
    return contextlib.nullcontext(None)


def _finish(step: Step, running: _Running, group: Path, say: Say = stdout) -> None:
    rc, stderr, seconds = running.wait()
    if step.rc is None:  # it ran (127: it could not start)
        step.rc, step.seconds = rc, seconds
        if step.name == "topo":
            part = group / (TOPOLOGY_FILE + ".part")
            if rc == 0 and part.read_text(encoding="utf-8").strip():
                part.replace(group / TOPOLOGY_FILE)
            else:
                part.unlink(missing_ok=True)
                step.note = _last_line(stderr) or "no output"
        elif stderr:
            sys.stderr.write(stderr)
            step.note = _last_line(stderr)
    took = f" in {step.seconds} s" if step.seconds is not None else ""
    say(f"# accept: {step.name} exited {step.rc}{took}" + (f": {step.note}" if step.rc else ""))


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


def step_checks(steps: list[Step], gpus: int | None = None) -> list[Check]:
    """A line per step; on 1 GPU with no sweep, the one line that says why."""
    out = []
    if gpus == 1 and steps and not any(s.name == "sweep" for s in steps):
        out.append(Check("suite", SKIP, "run", "sweep", ONE_GPU, description="collectives"))
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
