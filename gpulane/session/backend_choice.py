"""backend=auto, the default: which backend a sweep runs, chosen before anything starts.

On GPUs that is backend=nccl (NCCL called as nccl-tests calls it, so the numbers are
nccl-tests') when nccl4py imports and loads its libnccl here; otherwise backend=torch
(torch.distributed's NCCL), with one line saying why and how to get nccl. On CPUs it is
torch (gloo). The configuration saved for the ranks names the backend chosen, never auto.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from gpulane.config.backend import NcclBackendConfig, TorchBackendConfig
from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError

GPU_EXTRA = "pip install 'gpulane[gpu]'"


def nccl4py_problem() -> str | None:
    """None when nccl4py imports and finds a libnccl here, else why not (one line)."""
    try:
        import nccl.core  # noqa: F401 - what backend=nccl imports first
        from nccl.bindings import nccl as bindings
    except ImportError as err:
        return f"nccl4py does not import ({err})"
    try:
        bindings.get_version()
    except Exception as err:  # its loader's own words: which library, where it looked
        said = str(err).strip().splitlines()
        return f"nccl4py finds no libnccl ({said[0] if said else type(err).__name__})"
    return None


def choose_backend(
    cfg: SweepConfig, device: str, probe: Callable[[], str | None] = nccl4py_problem
) -> tuple[SweepConfig, str | None]:
    """``cfg`` with backend=auto and torch_overhead=auto resolved for ranks on ``device``
    (cuda or cpu), and the line to show the user about the choice (None: nothing to say)."""
    line = None
    chosen_nccl = False
    if cfg.backend.chosen_at_start:
        problem = probe() if device == "cuda" else "no GPU"
        if problem is None:
            cfg = dataclasses.replace(cfg, backend=_as_nccl(cfg.backend))
            chosen_nccl = True
            line = "# backend=auto: nccl (NCCL through nccl4py, called as nccl-tests calls it)"
        else:
            cfg = dataclasses.replace(cfg, backend=_as_torch(cfg.backend, problem))
            if device == "cuda":
                line = (
                    f"# backend=auto: torch, because {problem}; `{GPU_EXTRA}` gives "
                    "backend=nccl, which measures what nccl-tests measures"
                )
    return dataclasses.replace(cfg, torch_overhead=_overhead(cfg, device, chosen_nccl)), line


def _as_nccl(auto: Any) -> NcclBackendConfig:
    return NcclBackendConfig(
        memory=auto.memory or "nccl",
        register=bool(auto.register),
        loop=auto.loop,
        stream=auto.stream,
    )


def _as_torch(auto: Any, why: str) -> TorchBackendConfig:
    """torch's configuration; options only backend=nccl has stop the run, saying why."""
    asked = [
        f"backend.{key}={getattr(auto, key)}"
        for key, default in (("register", False), ("loop", "auto"), ("stream", "own"))
        if getattr(auto, key) != default
    ]
    if asked:
        raise InputError(
            f"{' '.join(asked)} asked for backend=nccl, but backend=auto chose torch "
            f"({why}); set backend=nccl, or leave those out"
        )
    return TorchBackendConfig(memory=auto.memory or "torch")


def _overhead(cfg: SweepConfig, device: str, chosen_nccl: bool) -> bool:
    asked = str(cfg.torch_overhead).lower()
    if asked == "auto":
        return chosen_nccl
    if asked == "true":
        if not cfg.backend.times_torch_beside or device != "cuda":
            raise InputError(
                "torch_overhead=true compares torch.distributed with backend=nccl: it needs "
                f"backend=nccl on GPUs (this run: backend={cfg.backend.name} on {device})"
            )
        return True
    return False
