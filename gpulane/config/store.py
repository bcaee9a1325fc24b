"""The typed configuration registered with Hydra's ConfigStore: each command's schema
(``<command>_schema``, first in conf/<command>.yaml's defaults) and each group option's
(``<option>_schema`` in conf/backend, conf/launcher, conf/preset), so that Hydra checks
types as it composes."""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from gpulane.config.backend import BACKENDS
from gpulane.config.commands import COMMANDS
from gpulane.config.common import PresetConfig
from gpulane.config.launcher import LAUNCHER_YAMLS, LAUNCHERS

_DONE = False


def registered() -> bool:
    return _DONE


def store_launcher(name: str) -> None:
    """``launcher=NAME``'s schema (and its YAML, for a launcher module outside gpulane)."""
    cs = ConfigStore.instance()
    cs.store(group="launcher", name=f"{name}_schema", node=LAUNCHERS[name])
    yaml = LAUNCHER_YAMLS.get(name)
    if yaml is not None:
        from omegaconf import OmegaConf

        cs.store(group="launcher", name=name, node=OmegaConf.load(yaml))


def register() -> None:
    global _DONE
    if _DONE:
        return
    cs = ConfigStore.instance()
    for name, schema in COMMANDS.items():
        cs.store(name=f"{name}_schema", node=schema)
    for name, schema in BACKENDS.items():
        cs.store(group="backend", name=f"{name}_schema", node=schema)
    for name in LAUNCHERS:
        store_launcher(name)
    cs.store(group="preset", name="preset_schema", node=PresetConfig)
    _DONE = True
