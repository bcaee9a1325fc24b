"""The serving-engine interface: what `gpulane tokens engine=NAME` needs of an engine that
is not gpulane's own decoder. Three parts: is it installed (and which version), run its own
benchmark at the run's shapes, and read what that benchmark wrote as gpulane rows."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from gpulane.config.commands import TokensConfig
from gpulane.inference.vllm_import import Meta
from gpulane.record import Row


class ServingEngine(Protocol):
    name: str
    """The engine's name as `engine=` takes it and rows carry it (backend, extra.engine)"""
    install_hint: str
    """What to install when it is asked for and missing"""

    def installed(self) -> str | None:
        """Its version where it is installed (without importing it), else None."""

    def model_path(self, cfg: TokensConfig) -> str | None:
        """The model directory the run gives this engine, None where it gives none."""

    def run(self, cfg: TokensConfig, say: Callable[[str], None]) -> int:
        """Its own benchmark at the run's shapes; rows in the run directory; exit status."""

    def rows(self, path: Path, meta: Meta) -> Iterator[Row]:
        """The rows of one result file its benchmark wrote."""


def installed_version(package: str) -> str | None:
    """A package's version where it can be imported, without importing it; None where not."""
    if importlib.util.find_spec(package) is None:
        return None
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"
