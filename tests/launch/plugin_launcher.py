"""A launcher added from outside gpulane, as a user (or a Kubernetes launcher) would add
one: this module (its config class and launcher class) and ``plugin_launcher.yaml``
beside it, registered by the decorator, found through ``$GPULANE_PLUGINS``. It starts
real local processes, as the local launcher does, and leaves a file in the run
directory that says it did (the test reads it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.config.launcher import LauncherConfig
from gpulane.launch.base import Launcher, LaunchSpec
from gpulane.launch.local import LocalLauncher
from gpulane.launch.registry import register_launcher

MARK_FILE = "started-by-plugin.txt"


@dataclass
class PluginLauncherConfig(LauncherConfig):
    """Ranks as local processes, started by a launcher from a test module."""

    name: str = "plugin"
    """Internal: the option's name"""
    greeting: str = "hello"
    """Written to started-by-plugin.txt in the run directory when the ranks start"""

    @property
    def on_this_host(self) -> bool:
        return True

    @property
    def runs_host_jobs(self) -> bool:
        return False  # says so: copies and token runs stay on launcher=local


@register_launcher(
    "plugin", PluginLauncherConfig, yaml=Path(__file__).with_name("plugin_launcher.yaml")
)
class PluginLauncher(LocalLauncher):
    def __init__(self, greeting: str) -> None:
        super().__init__()
        self.greeting = greeting

    @classmethod
    def from_config(
        cls, cfg: Any, config: LauncherConfig, device: str, needs_mpi: bool
    ) -> Launcher:
        assert isinstance(config, PluginLauncherConfig)
        return cls(config.greeting)

    def describe(self, spec: LaunchSpec) -> str:
        return f"{spec.nprocs} processes started by the plugin launcher"

    def start(self, spec: LaunchSpec) -> None:
        (spec.run_dir / MARK_FILE).write_text(f"{self.greeting} {spec.nprocs}\n")
        super().start(spec)
