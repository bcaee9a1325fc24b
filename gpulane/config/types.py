"""The types of keys that take one of several kinds of value: ``ranks=auto|N``,
``collectives=all_reduce`` or a list, ``in_place=both|true|false``.

Each is a union for the type checker. OmegaConf 2.3 holds no unions (beyond ``| None``),
so at run time the same name is ``Annotated[Any, <the union>]``: OmegaConf lets any value
through, and :func:`check_types` holds the value to the union after the checks with
their own words (``config.validate.check``), so a value of the wrong kind is one line
before any rank starts, as OmegaConf's own types are."""

from __future__ import annotations

import dataclasses
import typing
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from gpulane.config.choices import check_choices
from gpulane.errors import InputError

# The unions, as run-time objects (the checker reads them)
AutoOrIntUnion = Union[int, Literal["auto"]]  # noqa: UP007 - a run-time object
SizeUnion = Union[int, str]  # noqa: UP007 - bytes, or with a K/M/G suffix
StepUnion = Union[int, str, None]  # noqa: UP007
RunsUnion = Union[list[str], str, None]  # noqa: UP007 - run directories, rows files
WordsUnion = Union[list[str], str]  # noqa: UP007 - a list, or one word / a comma list
IntsUnion = Union[list[int], int, str]  # noqa: UP007 - a list, one number, or "1,8,32"
IntsOrNoneUnion = Union[list[int], int, str, None]  # noqa: UP007 - as Ints; null: not given
# basis -> low, high, within_15 (numbers) and of (the table it comes from)
ErrorBandsUnion = Union[dict[str, dict[str, Union[float, str]]], None]  # noqa: UP007
SwitchUnion = Union[bool, str]  # noqa: UP007 - true/false or a word (auto, both, live)
PeerAccessUnion = Union[list[bool], bool]  # noqa: UP007
ResumeUnion = Union[str, bool, None]  # noqa: UP007 - a run directory; true in the ranks
LocalizeUnion = Union[list[str], str, bool, None]  # noqa: UP007
PairUnion = Union[list[int], None]  # noqa: UP007
NodeListUnion = Union[list[str], str, None]  # noqa: UP007 - a hostlist, or the hosts
SbatchUnion = dict[str, Union[str, int, float, bool]]  # noqa: UP007
GpuSpecsUnion = dict[str, dict[str, float]]  # GPU model -> hbm_gbps, tflops, memory_gib
ShapeUnion = Union[dict[str, Union[str, int, float, bool]], None]  # noqa: UP007

if TYPE_CHECKING:
    AutoOrInt = AutoOrIntUnion
    Size = SizeUnion
    Step = StepUnion
    Runs = RunsUnion
    IntsOrText = IntsUnion
    Words = WordsUnion
    Ints = IntsUnion
    IntsOrNone = IntsOrNoneUnion
    ErrorBands = ErrorBandsUnion
    Switch = SwitchUnion
    PeerAccess = PeerAccessUnion
    Resume = ResumeUnion
    Localize = LocalizeUnion
    Pair = PairUnion
    NodeList = NodeListUnion
    SbatchArgs = SbatchUnion
    Shape = ShapeUnion
    GpuSpecs = GpuSpecsUnion
else:
    AutoOrInt = Annotated[Any, AutoOrIntUnion]
    Size = Annotated[Any, SizeUnion]
    Step = Annotated[Any, StepUnion]
    Runs = Annotated[Any, RunsUnion]
    IntsOrText = Annotated[Any, IntsUnion]
    Words = Annotated[Any, WordsUnion]
    Ints = Annotated[Any, IntsUnion]
    IntsOrNone = Annotated[Any, IntsOrNoneUnion]
    ErrorBands = Annotated[Any, ErrorBandsUnion]
    Switch = Annotated[Any, SwitchUnion]
    PeerAccess = Annotated[Any, PeerAccessUnion]
    Resume = Annotated[Any, ResumeUnion]
    Localize = Annotated[Any, LocalizeUnion]
    Pair = Annotated[Any, PairUnion]
    NodeList = Annotated[Any, NodeListUnion]
    SbatchArgs = Annotated[Any, SbatchUnion]
    Shape = Annotated[Any, ShapeUnion]
    GpuSpecs = Annotated[Any, GpuSpecsUnion]


def declared(hint: Any) -> Any:
    """The type a field declares: the union behind ``Annotated[Any, union]``, else the
    hint itself."""
    if typing.get_origin(hint) is Annotated and hint.__origin__ is Any:
        return hint.__metadata__[0]
    return hint


def conforms(value: Any, kind: Any) -> bool:
    """Whether ``value`` (plain data, as OmegaConf gives it) is of type ``kind``."""
    if kind is Any:
        return True
    if kind is None or kind is type(None):
        return value is None
    origin = typing.get_origin(kind)
    if origin is Union:
        return any(conforms(value, k) for k in typing.get_args(kind))
    if origin is Literal:
        return isinstance(value, str) and value.lower() in typing.get_args(kind)
    if origin is list:
        (item,) = typing.get_args(kind)
        return isinstance(value, (list, tuple)) and all(conforms(v, item) for v in value)
    if origin is dict:
        _, item = typing.get_args(kind)
        return isinstance(value, dict) and all(conforms(v, item) for v in value.values())
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(kind, type):
        return isinstance(value, kind)
    return True


def describe(kind: Any) -> str:
    """A type in a user's words: ``auto or a whole number``."""
    origin = typing.get_origin(kind)
    if origin is Union:
        parts = [describe(k) for k in typing.get_args(kind) if k is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in typing.get_args(kind) else "")
    if origin is Literal:
        return " or ".join(str(w) for w in typing.get_args(kind))
    if origin is list:
        item = typing.get_args(kind)[0]
        plural = {int: "whole numbers", float: "numbers", str: "words", bool: "true/false"}
        return f"a list of {plural.get(item, describe(item))}"
    if origin is dict:
        return "a mapping"
    words = {int: "a whole number", float: "a number", str: "a word", bool: "true or false"}
    return words.get(kind, getattr(kind, "__name__", str(kind)))


def union_fields(schema: type) -> dict[str, Any]:
    """Field name -> declared union, for the fields OmegaConf does not check."""
    hints = typing.get_type_hints(schema, include_extras=True)
    out = {}
    for f in dataclasses.fields(schema):
        hint = hints.get(f.name)
        if hint is not None and typing.get_origin(hint) is Annotated and hint.__origin__ is Any:
            out[f.name] = declared(hint)
    return out


def check_types(obj: Any, prefix: str = "") -> None:
    """One InputError for the first union field of ``obj`` (and of its nested dataclasses)
    whose value is of none of the union's kinds."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return
    check_choices(obj, prefix)  # the closed word sets (config/choices), before measuring
    unions = union_fields(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name in unions:
            if not conforms(value, unions[f.name]):
                raise InputError(
                    f"{prefix}{f.name}: expected {describe(unions[f.name])}, got {value!r}"
                )
        elif dataclasses.is_dataclass(value):
            check_types(value, f"{prefix}{f.name}.")
