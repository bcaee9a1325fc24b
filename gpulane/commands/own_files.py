"""A user's own model file on the command line: ``model=PATH.yaml`` (the shape keys, as
gpulane/conf/model/tiny.yaml writes them) or ``model=PATH/config.json`` (a Hugging Face
config, or the model's directory). The file is read and its shape checked before Hydra
composes anything, so that a bad file is one ``gpulane: error:`` line naming the file;
then it becomes the overrides of the ``hf`` model option, which holds any shape."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gpulane.errors import InputError

YAML_SUFFIXES = (".yaml", ".yml")


def _is_path(value: str) -> bool:
    return "/" in value or value.endswith((*YAML_SUFFIXES, ".json")) or Path(value).is_file()


def _quoted(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def model_overrides(argv: list[str]) -> list[str]:
    """``argv`` with a ``model=PATH`` turned into the ``hf`` option's overrides."""
    out: list[str] = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key == "model" and _is_path(value):
            out += _from_file(value)
        else:
            out.append(arg)
    return out


def _from_file(value: str) -> list[str]:
    from gpulane.inference.shapes import load_hf_config, shape_from_config

    path = Path(value).expanduser()
    where = f"model={value}"
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise InputError(f"{where}: no such file (a model file is PATH.yaml or a config.json)")
    if path.suffix == ".json":
        try:
            load_hf_config(path)  # the same checks as model.hf_config=
        except InputError as err:
            text = str(err).removeprefix("model.hf_config").lstrip(": ")
            raise InputError(
                f"{where}: {text.replace(f'{path}: ', '').replace(f'{path} ', '')}"
            ) from None
        return ["model=hf", f"model.hf_config={_quoted(str(path.resolve()))}"]
    if path.suffix not in YAML_SUFFIXES:
        raise InputError(f"{where}: expected a .yaml model file or a config.json")
    data = _read_yaml(path, where)
    if data.get("hf_config"):  # relative to the file, as a person reads it
        data["hf_config"] = str((path.parent / str(data["hf_config"])).resolve())
    data.setdefault("name", path.stem)
    _check_keys(data, where)
    try:
        shape_from_config(data)
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    out = ["model=hf", f"model.hf_config={_quoted(data.pop('hf_config', None))}"]
    out.append(f"model.name={_quoted(data.pop('name'))}")
    out += [f"+model.{k}={_quoted(v)}" for k, v in data.items() if v is not None]
    return out


def _check_keys(data: dict[str, Any], where: str) -> None:
    import difflib

    from gpulane.inference.shapes import ModelShape

    known = [f.name for f in dataclasses.fields(ModelShape)] + ["hf_config"]
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InputError(f"{where}: unknown key {key!r}{hint} (keys: {', '.join(known)})")


def _read_yaml(path: Path, where: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"{where}: cannot read: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise InputError(f"{where}: not a text file") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "cannot be read"
        raise InputError(f"{where}: not YAML{line}: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(
            f"{where}: expected the model's shape keys (hidden_size: 4096, num_layers: 32, "
            f"...), got {type(data).__name__}"
        )
    if "defaults" in data:
        data.pop("defaults")
    return {str(k): v for k, v in data.items()}
