"""The top-level fields and event list of a Chrome-trace JSON text that may be cut off.

A whole file is read with ``json.loads``. A cut or damaged one is read event by event
from the ``traceEvents`` array with ``json.JSONDecoder.raw_decode``: every complete event
before the cut is kept, and an event that is not valid JSON is skipped where the next
one starts, so one damaged line does not lose the rest of the profile.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpulane.errors import ParseError

_EVENTS_KEY = re.compile(r'"traceEvents"\s*:\s*\[')
# Where the next event starts after a damaged one: "}," then "{" (kineto writes one
# event per object, objects separated by commas).
_RESYNC = re.compile(r"\}\s*,\s*(?=\{)")


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def parse_chrome_json(
    text: str, source: str = "<text>"
) -> tuple[dict[str, Any], list[Any], list[str], bool, int]:
    """Top-level fields and events of a Chrome trace that may be cut off or damaged.

    Returns (meta, events, warnings, truncated, chars_used). A whole, valid file is read
    with ``json.loads``; otherwise events are read one by one from the ``traceEvents``
    array, keeping every complete event before a cut and skipping damaged ones.
    """
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        doc = None
    if isinstance(doc, dict):
        listed = doc.get("traceEvents")
        if not isinstance(listed, list):
            raise ParseError('not a Chrome trace: no "traceEvents" array', source)
        meta = {k: v for k, v in doc.items() if k != "traceEvents"}
        return meta, listed, [], False, len(text)
    if isinstance(doc, list):
        return {}, doc, [], False, len(text)
    if doc is not None:
        raise ParseError("not a Chrome trace: the JSON is neither an object nor an array", source)

    stripped = text.lstrip()
    m = _EVENTS_KEY.search(text)
    if m:
        start = m.end()
    elif stripped.startswith("["):
        start = len(text) - len(stripped) + 1
    else:
        snippet = stripped[:60].replace("\n", " ")
        if stripped.startswith("{"):
            # An object that does not close: most often a trace cut before its events.
            raise ParseError(
                f"cut off before its event list, or not a Chrome trace: no "
                f'"traceEvents" array in its {len(text)} characters (starts with {snippet!r})',
                source,
                1,
            )
        raise ParseError(
            f'not a Chrome trace: no "traceEvents" array found (starts with {snippet!r})',
            source,
            1,
        )
    meta = _salvage_meta(text, m.start() if m else 0)
    decoder = json.JSONDecoder()
    events: list[Any] = []
    warnings: list[str] = []
    truncated = False
    damaged = 0
    pos = start
    n = len(text)
    last_good = start
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n:
            truncated = True
            break
        if text[pos] == "]":
            break
        try:
            obj, end = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            nxt = _RESYNC.search(text, pos)
            if nxt is None:
                truncated = True
                break
            damaged += 1
            warnings.append(
                f"line {_line_of(text, pos)}: damaged event skipped (not valid JSON); "
                f"reading went on at line {_line_of(text, nxt.end())}"
            )
            pos = nxt.end()
            continue
        events.append(obj)
        pos = end
        last_good = end
    if truncated:
        warnings.append(
            f"file ends inside the event list (cut off at line {_line_of(text, n)}): read "
            f"{len(events)} complete events from the first {last_good} of {n} characters"
        )
    elif not _frame_is_whole(text, start, pos):
        # Every event is there, but what surrounds the list is not: kineto writes fields
        # after the events ("traceName"), so a file cut there must not pass as whole.
        truncated = True
        warnings.append(
            f"file is cut off or damaged after the event list (line {_line_of(text, pos)}): "
            f"read all {len(events)} events; fields written after the list are lost"
        )
    if damaged > 5:
        shown = [w for w in warnings if "damaged event" in w][:5]
        others = [w for w in warnings if "damaged event" not in w]
        warnings[:] = [*shown, f"{damaged} damaged events skipped in all", *others]
    return meta, events, warnings, truncated, last_good


def _frame_is_whole(text: str, list_start: int, list_end: int) -> bool:
    """Whether the text around the event list (``text[list_start:list_end]``, between its
    brackets) is valid JSON on its own: the damage that kept the whole text from parsing
    then lies inside the list only."""
    try:
        json.loads(text[:list_start] + text[list_end:])
    except (ValueError, RecursionError):
        return False
    return True


def _salvage_meta(text: str, limit: int) -> dict[str, Any]:
    """Top-level fields written before the event list (kineto writes deviceProperties there)."""
    meta: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    for key in ("deviceProperties", "schemaVersion", "displayTimeUnit", "cuda_runtime_version"):
        m = re.search(rf'"{key}"\s*:\s*', text[: limit or len(text)])
        if not m:
            continue
        try:
            meta[key], _ = decoder.raw_decode(text, m.end())
        except json.JSONDecodeError:
            continue
    return meta
