"""The meaning of each configuration key, as its dataclass documents it: the string
literal written under the field (an attribute docstring), read once from the source with
``ast``. `gpulane COMMAND --help` prints these; keys whose text starts with a hidden mark
(the run's own facts, self-tests of the checks) are left out of help and suggestions."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap

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
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source shipped: help says less, nothing fails
        return {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    out: dict[str, str] = {}
    statements = body.body
    for node, after in zip(statements, statements[1:], strict=False):
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
