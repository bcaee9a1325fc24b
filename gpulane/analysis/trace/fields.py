"""Tolerant readers of one field of a trace event or row.

Traces come cut off, hand-edited or from other tools' versions: a field may be missing,
a string, a bool, NaN. Each reader returns None for anything that is not a usable value,
so one odd field drops that value, never the whole file.
"""

from __future__ import annotations

import math
from typing import Any


def number(value: Any) -> float | None:
    """A finite float from a number or a numeric string (bools are not numbers here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def integer(value: Any) -> int | None:
    """An int from a number or string that holds a whole number."""
    f = number(value)
    return None if f is None or f != int(f) else int(f)


def event_args(ev: dict[str, Any]) -> dict[str, Any]:
    """An event's "args" object, or an empty one."""
    a = ev.get("args")
    return a if isinstance(a, dict) else {}


def memory_kind(word: str | None) -> str | None:
    """pageable, pinned, device, managed or array from a word such as "Pinned" or
    "PAGEABLE"; any other word is kept as written, lower-cased."""
    if not word:
        return None
    w = word.lower()
    for kind in ("pageable", "pinned", "device", "managed", "array"):
        if w.startswith(kind):
            return kind
    return w
