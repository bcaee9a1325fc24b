"""From a composed or saved configuration to the typed objects every command and rank
reads: unknown keys named with the closest valid one, values checked by their types, the
group options (backend, launcher, preset) as their own dataclasses."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gpulane.config.backend import BACKENDS
from gpulane.config.common import PresetConfig
from gpulane.config.launcher import LAUNCHERS
from gpulane.errors import InputError
from gpulane.rundir import CONFIG_FILE  # the floor below: it knows no configuration

T = TypeVar("T")

# group key -> option name -> schema (the option is the node's `name`)
GROUPS: dict[str, dict[str, type]] = {"backend": BACKENDS, "launcher": LAUNCHERS}
GROUP_DEFAULTS: dict[str, dict[str, Any]] = {
    "backend": {"name": "torch"},
    "launcher": {"name": "local"},
    "preset": {"name": "none", "env": {}},
}
FREE_KEYS = {"env", "sbatch_args", "gpu_specs", "model", "rules", "projection", "shape"}


# Set by the front when it saves a run's configuration, not by users: left out of lists.
RUN_FACTS = {"run_id", "world_size", "nodes", "path", "hosts", "shape", "full_layers", "kind"}


def unknown_key(key: str, known: list[str], where: str = "") -> InputError:
    """The closest key by spelling or meaning (gpulane.config.docs), else the keys there are."""
    from gpulane.config.docs import all_docs, closest_key, is_hidden_name

    name = key.rpartition(".")[2]
    offered = [k for k in known if k not in RUN_FACTS and not is_hidden_name(k)]
    close = closest_key(name, offered)
    if close:
        meaning = all_docs().get(close, "")
        about = f" ({meaning[:60].rstrip()}{'…' if len(meaning) > 60 else ''})" if meaning else ""
        return InputError(f"unknown key '{where}{name}'; did you mean '{where}{close}'{about}?")
    listing = f" (keys: {', '.join(offered)})" if offered else ""
    group = where.rstrip(".")
    owners = [o for o, schema in GROUPS.get(group, {}).items() if name in _field_names(schema)]
    if owners:  # backend.register on backend=torch: the options that have it
        options = ", ".join(f"{group}={o}" for o in owners)
        listing += f"; it is a key of {options}"
    return InputError(f"unknown key '{where}{name}'{listing}")


def _field_names(schema: type) -> set[str]:
    return {f.name for f in dataclasses.fields(schema)}


def check_keys(data: Any, schema: type, where: str = "") -> None:
    """Every key of ``data`` is a field of ``schema`` (recursively into typed fields)."""
    if not isinstance(data, dict):
        return
    fields = {f.name: f for f in dataclasses.fields(schema)}
    for key, value in data.items():
        if key not in fields:
            raise unknown_key(str(key), list(fields), where)
        sub = _schema_of(fields[key], key, value)
        if sub is not None and key not in FREE_KEYS:
            check_keys(value, sub, f"{where}{key}.")


def _schema_of(f: dataclasses.Field[Any], key: str, value: Any) -> type | None:
    if key in GROUPS and isinstance(value, dict):
        return GROUPS[key].get(str(value.get("name")))
    if key == "preset" and isinstance(value, dict):
        return PresetConfig
    kind = f.type if isinstance(f.type, type) else None
    if isinstance(f.type, str):
        kind = _resolve(f.type)
    return kind if kind is not None and dataclasses.is_dataclass(kind) else None


def _resolve(name: str) -> type | None:
    from gpulane.config import commands, common, launcher

    for module in (common, commands, launcher):
        found = getattr(module, name, None)
        if isinstance(found, type):
            return found
    return None


def typed(cfg: Any, schema: type[T]) -> T:
    """``cfg`` (a composed DictConfig, a saved one, or a dict) as ``schema``'s object."""
    if isinstance(cfg, schema):
        return cfg
    if OmegaConf.is_config(cfg):
        # Hydra's own node is not ours, and under -m it has keys that resolve only per job.
        raw = OmegaConf.to_container(cfg, resolve=False)
        assert isinstance(raw, dict)
        raw.pop("hydra", None)
        data = OmegaConf.to_container(OmegaConf.create(raw), resolve=True)
    else:
        data = dict(cfg)
    assert isinstance(data, dict)
    data.pop("hydra", None)
    # A configuration written by hand or by an older gpulane may leave out a group; take
    # the option conf/<command>.yaml chooses by default.
    fields = {f.name for f in dataclasses.fields(schema)}  # type: ignore[arg-type]
    for key, default in GROUP_DEFAULTS.items():
        if key in fields and data.get(key) is None:
            data[key] = dict(default)
    check_keys(data, schema)
    try:
        base = OmegaConf.structured(schema)
        for key, options in GROUPS.items():
            node = data.get(key)
            if isinstance(node, dict) and str(node.get("name")) in options:
                base[key] = OmegaConf.structured(options[str(node["name"])])
        if isinstance(data.get("preset"), dict):
            base["preset"] = OmegaConf.structured(PresetConfig)
        merged = OmegaConf.merge(base, data)
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as err:
        raise InputError(config_error(err)) from None


def config_error(err: OmegaConfBaseException) -> str:
    """OmegaConf's several lines as one: the key and what is wrong with its value."""
    key = getattr(err, "full_key", None) or ""
    msg = str(getattr(err, "msg", None) or err).strip().splitlines()[0]
    m = re.match(r"Value '(.*)' of type '\w+' could not be converted to (\w+)", msg)
    if m:
        words = {"Integer": "a whole number", "Float": "a number", "Boolean": "true or false"}
        msg = f"{m.group(1)!r} is not {words.get(m.group(2), m.group(2))}"
    m = re.match(r"Invalid type assigned: (\w+) is not a subclass of (\w+)\. value: (.*)", msg)
    if m:
        msg = f"a group of keys ({key}.KEY=VALUE), not a value; got {m.group(3)}"
    return f"{key}: {msg}" if key else msg


def load_saved(run_dir: str | os.PathLike[str], schema: type[T] | None) -> Any:
    """The configuration a run saved for its ranks, as ``schema`` (as saved when None)."""
    path = Path(run_dir) / CONFIG_FILE
    loaded = OmegaConf.load(path)
    assert isinstance(loaded, DictConfig)
    return loaded if schema is None else typed(loaded, schema)


def as_dict(cfg: Any) -> dict[str, Any]:
    """A typed configuration (or a DictConfig) as plain data, for saving."""
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        data = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)
    else:
        data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    return data  # type: ignore[return-value]
