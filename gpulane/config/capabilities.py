"""A configuration's backend and launcher as their typed option objects, whose properties
say what they can do (``launcher_of(cfg).places_on_nodes``, ``backend_of(cfg).needs_mpi``).

A typed configuration (``config.load.typed``) holds them already; a composed
``DictConfig`` (Hydra's callbacks get one) carries no properties, so its node is turned
into the option's class, found by its name in the options known (``BACKENDS``,
``LAUNCHERS``)."""

from __future__ import annotations

from typing import Any, TypeVar

from gpulane.config.backend import BACKENDS, BackendConfig
from gpulane.config.launcher import LAUNCHERS, LauncherConfig, LocalLauncherConfig
from gpulane.errors import InputError

T = TypeVar("T")


def _typed(node: Any, base: type[T], options: dict[str, type[Any]], group: str) -> T:
    if isinstance(node, base):
        return node
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(data, dict):
        raise InputError(f"{group}: expected a {group} option, got {node!r}")
    name = str(data.get("name"))
    schema = options.get(name)
    if schema is None:
        raise InputError(f"{group}={name}: no such option; choose one of {', '.join(options)}")
    merged = OmegaConf.merge(OmegaConf.structured(schema), data)
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def backend_of(cfg: Any) -> BackendConfig:
    """``cfg.backend`` as its option's object."""
    return _typed(cfg.backend, BackendConfig, dict(BACKENDS), "backend")


def launcher_of(cfg: Any) -> LauncherConfig:
    """``cfg.launcher`` as its option's object; a configuration without one (copy,
    tokens) runs on this host's processes, the local launcher."""
    return as_launcher(getattr(cfg, "launcher", None))


def as_launcher(node: Any) -> LauncherConfig:
    """A launcher node (typed, a DictConfig or a dict) as its option's object; none: the
    local launcher, every command's default."""
    if node is None or node == "???":
        return LocalLauncherConfig()
    return _typed(node, LauncherConfig, dict(LAUNCHERS), "launcher")
