"""The one launcher registry: ``launcher=NAME`` -> (its config class, its launcher class).

Sweeps, copies, token runs and campaigns all get their launcher here. A launcher is one
module: a :class:`~gpulane.config.launcher.LauncherConfig` subclass (its keys and
capabilities), a :class:`~gpulane.launch.base.Launcher` subclass decorated with
:func:`register_launcher`, and one YAML file, ``conf/launcher/NAME.yaml`` (or, for a
module outside gpulane, the YAML given to the decorator). The registry finds the modules
by that decorator: every module under ``gpulane/launch/`` that uses it, and the modules
named in ``$GPULANE_PLUGINS`` (comma-separated; the ranks inherit it)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gpulane.config.capabilities import launcher_of
from gpulane.config.launcher import LAUNCHERS, LauncherConfig, add_launcher_config
from gpulane.errors import InputError
from gpulane.launch.base import Launcher

PLUGINS_ENV = "GPULANE_PLUGINS"
MARK = "@register_launcher("

L = TypeVar("L", bound=type[Launcher])


@dataclass(frozen=True)
class LauncherEntry:
    name: str
    config: type[LauncherConfig]
    launcher: type[Launcher]


REGISTRY: dict[str, LauncherEntry] = {}
_found = False


def register_launcher(
    name: str, config: type[LauncherConfig], yaml: Path | None = None
) -> Callable[[L], L]:
    """Class decorator: ``launcher=NAME`` starts ranks with the class, configured by
    ``config``. ``yaml``: the option's YAML when it is not in gpulane/conf/launcher/ (a
    module outside gpulane); it goes to Hydra's ConfigStore as ``launcher/NAME``."""

    def add(cls: L) -> L:
        REGISTRY[name] = LauncherEntry(name, config, cls)
        cls.name = name
        add_launcher_config(name, config, yaml)
        return cls

    return add


def launcher_modules() -> list[str]:
    """The modules under gpulane/launch/ that register a launcher (found by the decorator
    in their text, so that nothing else is imported), then those of $GPULANE_PLUGINS."""
    root = Path(__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name != "registry.py" and MARK in path.read_text(encoding="utf-8"):
            parts = path.relative_to(root.parent.parent).with_suffix("").parts
            found.append(".".join(parts))
    plugins = [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]
    return found + plugins


def discover() -> None:
    """Import every launcher module once (their decorators fill the registry)."""
    global _found
    if _found:
        return
    _found = True
    for module in launcher_modules():
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise InputError(f"{PLUGINS_ENV}: cannot import {module} ({err})") from None


def entry(name: str) -> LauncherEntry:
    discover()
    found = REGISTRY.get(name)
    if found is None:
        raise InputError(
            f"launcher: unknown launcher {name!r}; use one of {', '.join(sorted(REGISTRY))}"
        )
    return found


def launcher_config(cfg: Any) -> LauncherConfig:
    """``cfg.launcher`` as its typed option (every launcher module known first)."""
    discover()
    return launcher_of(cfg)


def make_launcher(cfg: Any, device: str = "cpu", needs_mpi: bool = False) -> Launcher:
    """``cfg.launcher`` as a launcher; ``needs_mpi``: the ranks start MPI themselves (the
    mpi4py backend, nccl-tests built with MPI=1)."""
    config = launcher_config(cfg)
    return entry(config.name).launcher.from_config(cfg, config, device, needs_mpi)


def host_launcher(cfg: Any, what: str, device: str) -> Launcher:
    """The launcher of a run whose ranks must be on this host (copies, token runs); one
    InputError when the configured one cannot start them here."""
    config = launcher_config(cfg)
    if not config.runs_host_jobs:
        raise InputError(
            f"launcher={config.name} cannot run {what}: their ranks run on this host, where "
            "their GPUs were counted; use launcher=local"
        )
    return entry(config.name).launcher.from_config(cfg, config, device, False)


def node_launcher(cfg: Any, device: str, nodes: list[str], prepared: Any = None) -> Launcher:
    """The launcher of a campaign's element: its ranks on ``nodes``; ``prepared``: what
    the launcher worked out once for the whole campaign (Slurm's checked settings)."""
    config = launcher_config(cfg)
    return entry(config.name).launcher.for_nodes(cfg, config, device, nodes, prepared)


def known() -> dict[str, type[LauncherConfig]]:
    discover()
    return dict(LAUNCHERS)
