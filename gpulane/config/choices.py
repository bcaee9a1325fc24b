"""Closed sets of words a key takes (backend.memory=torch|nccl, launcher.bind=none|core).

Each set is a ``Literal`` for the type checker. OmegaConf 2.3 refuses ``Literal`` in a
structured config ("Unexpected type annotation"), so at run time the same name is
``Annotated[str, Literal[...]]``: OmegaConf sees a string, and :func:`check_choices`
reads the words from the annotation, so each set is written once."""

from __future__ import annotations

import dataclasses
import typing
from typing import TYPE_CHECKING, Annotated, Any, Literal

from gpulane.errors import InputError

MemoryWords = Literal["torch", "nccl"]
LoopWords = Literal["auto", "python", "c"]
StreamWords = Literal["own", "current"]
UseJsonWords = Literal["auto", "true", "false"]
BuffersWords = Literal["auto", "device", "host"]
ArrayWords = Literal["auto", "torch", "cupy"]
BindWords = Literal["none", "core"]
StartWords = Literal["fork", "exec"]
EngineWords = Literal["auto", "gpulane", "vllm", "sglang"]
DeviceWords = Literal["auto", "cuda", "cpu"]
AcceptFormatWords = Literal["table", "markdown", "json", "none"]
AdviseFormatWords = Literal["table", "json"]
OnOffWords = Literal["on", "off"]

if TYPE_CHECKING:
    Memory = MemoryWords
    Loop = LoopWords
    Stream = StreamWords
    UseJson = UseJsonWords
    Buffers = BuffersWords
    Array = ArrayWords
    Bind = BindWords
    Start = StartWords
    Engine = EngineWords
    Device = DeviceWords
    AcceptFormat = AcceptFormatWords
    AdviseFormat = AdviseFormatWords
    OnOff = OnOffWords
else:
    Memory = Annotated[str, MemoryWords]
    Loop = Annotated[str, LoopWords]
    Stream = Annotated[str, StreamWords]
    UseJson = Annotated[str, UseJsonWords]
    Buffers = Annotated[str, BuffersWords]
    Array = Annotated[str, ArrayWords]
    Bind = Annotated[str, BindWords]
    Start = Annotated[str, StartWords]
    Engine = Annotated[str, EngineWords]
    Device = Annotated[str, DeviceWords]
    AcceptFormat = Annotated[str, AcceptFormatWords]
    AdviseFormat = Annotated[str, AdviseFormatWords]
    OnOff = Annotated[str, OnOffWords]


def words_of(hint: Any) -> tuple[str, ...] | None:
    """The words of a choice annotation (also inside ``X | None``), None for any other."""
    if typing.get_origin(hint) is typing.Union:
        for arg in typing.get_args(hint):
            found = words_of(arg)
            if found is not None:
                return found
        return None
    if typing.get_origin(hint) is Annotated:
        for meta in hint.__metadata__:
            if typing.get_origin(meta) is Literal:
                return tuple(str(w) for w in typing.get_args(meta))
    return None


def choices(schema: type) -> dict[str, tuple[str, ...]]:
    """Field name -> the words it takes, for the choice fields of a dataclass."""
    hints = typing.get_type_hints(schema, include_extras=True)
    out = {}
    for f in dataclasses.fields(schema):
        found = words_of(hints.get(f.name))
        if found is not None:
            out[f.name] = found
    return out


def check_choices(obj: Any, prefix: str) -> None:
    """One InputError for the first choice field of ``obj`` holding another word (case
    does not matter; null is left to the field's own meaning)."""
    for key, allowed in choices(type(obj)).items():
        value = getattr(obj, key, None)
        if value is not None and str(value).lower() not in allowed:
            words = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"
            raise InputError(f"{prefix}{key}: expected {words}, got {value!r}")
