"""The meaning of each configuration key, as its dataclass documents it: the string
literal written under the field (an attribute docstring), read once from the source with
``ast``. `gpulane COMMAND --help` prints these; keys whose text starts with a hidden mark
(the run's own facts, self-tests of the checks) are left out of help and suggestions."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools

# A field whose docstring starts with one of these is not a user's key: the front writes it
# when it saves a run (Internal), or it tests gpulane's own checks (Self-test).
HIDDEN_MARKS = ("Internal:", "Self-test:")


@functools.cache
def field_docs(schema: type) -> dict[str, str]:
    """Field name -> its docstring (whitespace folded to one line), for ``schema`` and the
    dataclasses it inherits from."""
    docs: dict[str, str] = {}
    for cls in reversed(schema.__mro__):
        if cls is object or not dataclasses.is_dataclass(cls):
            continue
        docs.update(_own_docs(cls))
    return docs


def _own_docs(cls: type) -> dict[str, str]:
    return _module_docs(cls.__module__).get(cls.__qualname__, {})


@functools.cache
def _module_docs(module_name: str) -> dict[str, dict[str, str]]:
    """Class name -> field -> docstring, for every class of a module (parsed once)."""
    import sys

    module = sys.modules.get(module_name)
    try:
        path = inspect.getsourcefile(module) if module is not None else None
        source = open(path, encoding="utf-8").read() if path else ""  # noqa: SIM115
    except (OSError, TypeError):  # no source shipped: help says less, nothing fails
        return {}
    out: dict[str, dict[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = _class_docs(node)
    return out


def _class_docs(body: ast.ClassDef) -> dict[str, str]:
    out: dict[str, str] = {}
    statements = body.body
    for node, after in itertools.pairwise(statements):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            out[node.target.id] = " ".join(after.value.value.split())
    return out


def hidden(schema: type, name: str) -> bool:
    """True for a key that help and suggestions leave out."""
    return field_docs(schema).get(name, "").startswith(HIDDEN_MARKS)


def visible_fields(schema: type) -> list[str]:
    """``schema``'s keys a user sets, in the order the dataclass declares them."""
    return [f.name for f in dataclasses.fields(schema) if not hidden(schema, f.name)]


def class_doc(schema: type) -> str:
    """The first sentence-line of a dataclass's own docstring ("" when it has none)."""
    doc = schema.__doc__ or ""
    if doc.startswith(f"{schema.__name__}("):  # dataclass's generated signature
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split())


@functools.cache
def all_docs() -> dict[str, str]:
    """Every key of every command's configuration (and its groups' options) -> its meaning;
    the first documentation of a name wins (a name means the same wherever it is)."""
    from gpulane.config.backend import BACKENDS
    from gpulane.config.commands import COMMANDS, SuiteConfig, VllmConfig
    from gpulane.config.common import PresetConfig, SizesConfig
    from gpulane.config.launcher import LAUNCHERS, ContainerConfig

    docs: dict[str, str] = {}
    nested = [SizesConfig, PresetConfig, SuiteConfig, VllmConfig, ContainerConfig]
    for schema in [*COMMANDS.values(), *BACKENDS.values(), *LAUNCHERS.values(), *nested]:
        for name, text in field_docs(schema).items():
            docs.setdefault(name, text)
    return docs


def _words(text: str) -> set[str]:
    import re

    return {w for w in re.split(r"[^a-z0-9]+", text.lower()) if len(w) >= 3}


def closest_key(name: str, keys: list[str]) -> str | None:
    """The key a person most likely meant by ``name``: one spelled almost the same, else
    one whose meaning mentions the words of ``name`` (size -> sizes, algo -> env); None
    when nothing is close ("foo")."""
    import difflib

    close = difflib.get_close_matches(name, keys, n=1, cutoff=0.75)
    if close:
        return close[0]
    wanted = _words(name.replace("_", " "))
    if not wanted:
        return None
    docs = all_docs()
    scored = []
    for key in keys:
        found = wanted & (_words(docs.get(key, "")) | _words(key.replace("_", " ")))
        if found:
            scored.append((len(found), -keys.index(key), key))
    if scored:
        return max(scored)[2]
    # A stem in common (nranks -> ranks, message_sizes -> sizes) as a last resort.
    for key in keys:
        if len(key) >= 4 and key in name.lower():
            return key
    return None


def is_hidden_name(name: str) -> bool:
    return all_docs().get(name, "").startswith(HIDDEN_MARKS)
