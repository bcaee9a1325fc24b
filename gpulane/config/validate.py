"""The checks every command's configuration passes before anything starts, in one place:
values a type alone cannot rule out (a timeout of 0, a device that does not exist,
ranks=0), the backend's and the launcher's own (their ``validate()``: backend.memory,
launcher.bind, the Slurm keys), then the kind of every key that takes several kinds of
value (``config.types.check_types``). What needs the collective specs or the GPUs (sizes,
collectives, the placements a backend can run) is checked by the command's plan, also
before any rank starts."""

from __future__ import annotations

import re
from typing import Any

from gpulane.config.backend import BackendConfig
from gpulane.config.commands import CopyConfig, SweepConfig, TokensConfig
from gpulane.config.common import CommonConfig
from gpulane.config.launcher import LauncherConfig
from gpulane.config.types import check_types
from gpulane.errors import InputError

DEVICES = ("auto", "cuda", "cpu")
# A run id names a directory under results_dir: one safe path component.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


def whole(value: Any, key: str, minimum: int, words: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{key}: expected {words}a whole number >= {minimum}, got {value!r}")
    return value


def auto_or_whole(value: Any, key: str, minimum: int = 1) -> None:
    if str(value).lower() != "auto":
        whole(value, key, minimum, "auto or ")


def check(cfg: CommonConfig) -> None:
    """Raise one InputError for the first value that cannot work."""
    if not cfg.timeout_s > 0:
        raise InputError(f"timeout_s: expected seconds > 0, got {cfg.timeout_s!r}")
    if not str(cfg.results_dir or "").strip():
        raise InputError("results_dir: expected a directory, got an empty value")
    if cfg.run_id is not None:
        check_run_id(cfg.run_id)
    launcher = getattr(cfg, "launcher", None)
    if isinstance(launcher, LauncherConfig):
        launcher.validate()
    device = getattr(cfg, "device", None)
    if device is not None and str(device).lower() not in DEVICES:
        raise InputError(f"device: expected auto, cuda or cpu, got {device!r}")
    if isinstance(cfg, (SweepConfig, TokensConfig)) and str(device).lower() == "cpu":
        check_preset(cfg, "cpu")
    if isinstance(cfg, SweepConfig):
        if isinstance(cfg.backend, BackendConfig):
            cfg.backend.validate()
        auto_or_whole(cfg.ranks, "ranks")
        whole(cfg.warmup, "warmup", 0)
        whole(cfg.iters, "iters", 1)
        whole(cfg.check_iters, "check_iters", 0)
        whole(cfg.graph_launches, "graph_launches", 1)
        if cfg.graph and str(getattr(cfg.backend, "stream", "own")) == "current":
            raise InputError(
                "backend.stream=current (the legacy default stream) cannot be captured in a "
                "CUDA graph; use backend.stream=own with graph=true"
            )
        if str(cfg.torch_overhead).lower() not in ("auto", "true", "false"):
            raise InputError(
                f"torch_overhead: expected auto, true or false, got {cfg.torch_overhead!r}"
            )
        for key in ("corrupt_rank", "skip_rank", "slow_rank"):
            value = getattr(cfg, key)
            if value is not None:
                whole(value, key, 0)
        check_localize(cfg)
    if isinstance(cfg, TokensConfig):
        auto_or_whole(cfg.tp, "tp")
        whole(cfg.pp, "pp", 1)
        whole(cfg.iters, "iters", 1)
        whole(cfg.warmup, "warmup", 0)
        whole(cfg.prefill_chunk_tokens, "prefill_chunk_tokens", 1)
        if not 0 < cfg.memory_fraction <= 1:
            raise InputError(
                f"memory_fraction: expected a fraction in (0, 1], got {cfg.memory_fraction!r}"
            )
    if isinstance(cfg, CopyConfig):
        whole(cfg.samples, "samples", 1)
        whole(cfg.warmup, "warmup", 0)
        whole(cfg.max_reps, "max_reps", 1)
    # Keys of several kinds (ranks=auto|N, collectives=a word or a list), after the checks
    # above that say more about the values they know.
    check_types(cfg)


LOCALIZE_PATTERNS = ("pairs", "halving", "ring")


def check_localize(cfg: SweepConfig) -> None:
    """localize=pairs|halving|ring (or none), its tolerance, the planted slowdown."""
    value = cfg.localize
    names = [value] if value is None or isinstance(value, (str, bool)) else list(value)
    for pattern in names:
        text = str(pattern).strip("[] ").lower() if pattern not in (None, False) else "none"
        if any(p.strip() not in (*LOCALIZE_PATTERNS, "none", "") for p in text.split(",")):
            raise InputError(
                f"localize: expected {', '.join(LOCALIZE_PATTERNS)} (or a list of them) or "
                f"none, got {value!r}"
            )
    if not 0 < float(cfg.localize_tolerance) <= 1:
        raise InputError(
            f"localize_tolerance: expected a fraction in (0, 1], got {cfg.localize_tolerance!r}"
        )
    if cfg.slow_pair is not None:
        pair = cfg.slow_pair if isinstance(cfg.slow_pair, (list, tuple)) else None
        if pair is None or len(pair) != 2:
            pair = list(cfg.slow_pair) if not isinstance(cfg.slow_pair, str) else []
        if len(pair) != 2 or pair[0] == pair[1]:
            raise InputError(f"slow_pair: expected two ranks [a,b], got {cfg.slow_pair!r}")
        for v in pair:
            whole(v, "slow_pair", 0)
    if float(cfg.slow_ms) < 0:
        raise InputError(f"slow_ms: expected milliseconds >= 0, got {cfg.slow_ms!r}")


def check_run_id(run_id: Any) -> str:
    """``run_id=NAME`` names the run directory: one path component of letters, digits and
    ``. _ + -`` (no ``/``, no leading dot, no spaces), so it cannot land outside
    results_dir or hide."""
    text = str(run_id)
    if not RUN_ID.fullmatch(text):
        raise InputError(
            f"run_id: {text!r} is not a usable directory name; use letters, digits and "
            ". _ + - (starting with a letter or digit, at most 128 characters)"
        )
    return text


def preset_name(cfg: Any) -> str:
    preset = getattr(cfg, "preset", None)
    return str(getattr(preset, "name", None) or "none")


def nccl_ignored_by(cfg: Any, device: str) -> str | None:
    """What of this run ignores NCCL_* variables (MPI, gloo on CPUs), or None."""
    backend = getattr(cfg, "backend", None)  # none (tokens): torch.distributed's
    if isinstance(backend, BackendConfig) and not backend.uses_nccl:
        return f"backend={backend.name} (MPI moves the data, not NCCL)"
    if device == "cpu" and (not isinstance(backend, BackendConfig) or backend.gloo_on_cpus):
        return "torch.distributed's gloo on CPU ranks"
    return None


def check_nccl_env(cfg: Any, device: str) -> None:
    """+env.NCCL_*=... on a run that does not use NCCL is refused, as a preset is: the
    run would carry a setting that changed nothing."""
    # NCCL_DEBUG* only makes NCCL say what it did: no setting of the measurement
    names = sorted(
        k
        for k in (getattr(cfg, "env", None) or {})
        if str(k).startswith("NCCL_") and not str(k).startswith("NCCL_DEBUG")
    )
    ignores = nccl_ignored_by(cfg, device) if names else None
    if ignores:
        raise InputError(
            f"env.{names[0]}: NCCL_* variables are ignored by {ignores}, so the run would "
            f"measure the same thing under another setting; drop +env.{names[0]}, or run "
            "NCCL on GPUs (backend=nccl, torch or nccl_tests)"
        )


def check_preset(cfg: Any, device: str) -> None:
    """A preset (nvlink, pcie-host, socket) sets NCCL_* variables and labels the run by
    them; on a backend that does not use NCCL (gloo on CPUs, MPI) it changes nothing, and
    runs under different presets would be compared as if they measured different paths."""
    check_nccl_env(cfg, device)
    preset = preset_name(cfg)
    if preset == "none":
        return
    ignores = nccl_ignored_by(cfg, device)
    if ignores:
        raise InputError(
            f"preset={preset}: a preset sets NCCL_* variables, which {ignores} ignores, so "
            "the run would measure the same thing under another name; drop preset= "
            "(label the run with build=NAME), or run NCCL on GPUs (backend=nccl, torch or "
            "nccl_tests)"
        )
