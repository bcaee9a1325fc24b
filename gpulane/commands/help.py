"""`gpulane COMMAND --help` for the Hydra commands, built from the typed configuration
without composing it: the command's intro and examples (its conf YAML's help text), the
groups and their options, and every key a user sets with its default and one line of
meaning (the dataclass field's docstring, gpulane.config.docs). No Hydra, no torch: help
prints in well under a second."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gpulane.config.docs import class_doc, field_docs, visible_fields

# gpulane/conf as files: importing the package would register the schemas with Hydra.
CONF = Path(__file__).resolve().parents[1] / "conf"
# The group keys whose options are dataclasses of their own (backend.KEY, launcher.KEY).
TYPED_GROUPS = ("backend", "launcher")
WIDTH = 100


def _conf_text(*parts: str) -> str:
    return CONF.joinpath(*parts).read_text(encoding="utf-8")


def intro(conf_text: str) -> str:
    """The command's own help text (conf/<command>.yaml hydra.help.template: the indented
    block under ``template: |-``), without the parts Hydra fills in. Read as text: PyYAML
    would be a third of help's time."""
    lines = conf_text.splitlines()
    try:
        at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("template: |"))
    except StopIteration:
        return ""
    indent = len(lines[at + 1]) - len(lines[at + 1].lstrip()) if at + 1 < len(lines) else 0
    block = []
    for line in lines[at + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        block.append(line[indent:])
    template = "\n".join(block)
    for stop in ("Config groups (choose", "Current configuration:", "$CONFIG"):
        template = template.split(stop)[0]
    return template.rstrip()


def default_options(conf_text: str) -> dict[str, str]:
    """Group -> the option conf/<command>.yaml's defaults list chooses ("  - model: tiny")."""
    out: dict[str, str] = {}
    for line in conf_text.splitlines():
        item = line.strip()
        if item.startswith("- ") and ":" in item and not item.startswith("- override"):
            group, _, option = item[2:].partition(":")
            if group.strip().isidentifier() and option.strip():
                out[group.strip()] = option.strip()
    return out


def group_options(group: str) -> dict[str, str]:
    """A group's options, each with the first line of meaning its YAML file starts with."""
    folder = CONF / group
    out: dict[str, str] = {}
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if not path.name.endswith(".yaml"):
            continue
        first = ""
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("#") and "@package" not in line:
                first = line.lstrip("# ").strip()
                break
        out[path.name[: -len(".yaml")]] = first
    return out


def _default(schema: type, name: str, instance: Any = None) -> str:
    """A key's default as written on the command line ("" for a required group)."""
    if instance is not None:
        value = getattr(instance, name)
    else:
        f = {f.name: f for f in dataclasses.fields(schema)}[name]
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            return ""
    if dataclasses.is_dataclass(value):
        return ""
    if isinstance(value, dict):
        return "{}" if not value else ""
    text = _value(value)
    return "" if text == "???" else text


def _value(value: Any) -> str:
    """A default as it is written on the command line (true, null, [a,b])."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value)


def _is_dataclass_field(schema: type, name: str) -> type | None:
    import typing

    kind = typing.get_type_hints(schema).get(name)
    return kind if isinstance(kind, type) and dataclasses.is_dataclass(kind) else None


def key_rows(schema: type, instance: Any = None, prefix: str = "") -> list[tuple[str, str, str]]:
    """(key, default, meaning) for every visible key, nested dataclasses as dotted keys
    (with the defaults the outer one gives them: copy's sizes start at 4K)."""
    docs = field_docs(schema)
    rows: list[tuple[str, str, str]] = []
    fields = {f.name: f for f in dataclasses.fields(schema)}
    for name in visible_fields(schema):
        if not prefix and name in (*TYPED_GROUPS, "preset", "model", "rules"):
            continue  # listed with the groups
        sub = _is_dataclass_field(schema, name)
        if sub is not None:
            f = fields[name]
            if instance is not None:
                inner = getattr(instance, name)
            elif f.default_factory is not dataclasses.MISSING:
                inner = f.default_factory()
            else:
                inner = None
            rows += key_rows(sub, inner, f"{prefix}{name}.")
            continue
        rows.append((f"{prefix}{name}", _default(schema, name, instance), docs.get(name, "")))
    return rows


def _table(rows: list[tuple[str, str, str]], indent: str = "  ") -> list[str]:
    key_w = min(max((len(k) for k, _, _ in rows), default=0), 28)
    def_w = min(max((len(d) for _, d, _ in rows), default=0), 18)
    out = []
    for key, default, meaning in rows:
        head = f"{indent}{key:<{key_w}}  {default:<{def_w}}  "
        if len(head) > key_w + def_w + 6 + len(indent):  # a long key or default: own line
            out.append(f"{indent}{key}  {default}")
            head = " " * (len(indent) + key_w + def_w + 4)
        out.append((head + meaning).rstrip())
    return out


def _group_section(group: str, chosen: str | None) -> list[str]:
    from gpulane.config.backend import BACKENDS
    from gpulane.config.launcher import LAUNCHERS

    options = group_options(group)
    lines = [f"{group}=OPTION  (default: {chosen})" if chosen else f"{group}=OPTION"]
    groups: dict[str, dict[str, Any]] = {"backend": BACKENDS, "launcher": LAUNCHERS}
    schemas = groups.get(group, {})
    for name, first in options.items():
        meaning = class_doc(schemas[name]) if name in schemas else first
        lines.append(f"  {name:<14}{meaning}".rstrip())
    if group == "model":
        lines.append("  PATH.yaml     your own model file: its shape keys (docs/models.md)")
        lines.append("  PATH/config.json  a Hugging Face config (or the model's directory)")
    if schemas:
        by_key: dict[str, list[str]] = {}
        meaning_of: dict[str, str] = {}
        default_of: dict[str, str] = {}
        for name, schema in schemas.items():
            for key, default, meaning in key_rows(schema):
                by_key.setdefault(key, []).append(name)
                meaning_of.setdefault(key, meaning)
                default_of.setdefault(key, default)
        rows = []
        for key, names in by_key.items():
            where = "" if len(names) == len(schemas) else f" ({', '.join(names)})"
            rows.append((f"{group}.{key}", default_of[key], meaning_of[key] + where))
        lines.append(f"  keys of the options ({group}.KEY=VALUE):")
        lines += _table(rows, "    ")
    return lines


def render(command: str) -> str:
    from gpulane.config.commands import COMMANDS

    schema = COMMANDS[command]
    conf = _conf_text(f"{command}.yaml")
    chosen = default_options(conf)
    fields = {f.name for f in dataclasses.fields(schema)}
    lines = [intro(conf), ""]
    groups = [g for g in (*TYPED_GROUPS, "preset", "model", "rules") if g in fields]
    if groups:
        lines.append("Groups (GROUP=OPTION):")
        for group in groups:
            lines += ["  " + line for line in _group_section(group, chosen.get(group))]
        lines.append("")
    lines.append("Keys (KEY=VALUE; a new key of env and other maps: +KEY=VALUE):")
    lines += _table(key_rows(schema))
    lines += [
        "",
        "Multirun: -m KEY=A,B runs one job per value. Hydra's own help: --hydra-help;",
        "the composed configuration: --cfg job.",
    ]
    return "\n".join(lines)
