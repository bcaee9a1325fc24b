"""Who a row is about: a GPU, a pair (``GPU0->GPU1``), a node, or all rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PER = ("auto", "gpu", "pair", "node", "all")


def subject_of(
    row: Mapping[str, Any], per: str, multi_host: bool, multi_build: bool = False
) -> str:
    """Who a row is about: a GPU, a pair (``GPU0->GPU1``), a node; ``build/`` in front
    when the rows hold more than one build (they are never pooled)."""
    subject = _subject(row, per, multi_host)
    return f"{row.get('build')}/{subject}" if multi_build else subject


def _subject(row: Mapping[str, Any], per: str, multi_host: bool) -> str:
    kind, op = row.get("kind"), row.get("op")
    host = row.get("host") if isinstance(row.get("host"), str) else None
    node = host or (str(row.get("build")) if row.get("build") is not None else "-")
    if per == "auto":
        per = ("pair" if op == "p2p" else "gpu") if kind == "copy" else "node"
    if per == "all":
        return "all"
    if per == "node":
        return node
    src, dst = row.get("src"), row.get("dst")
    if per == "gpu":
        if kind == "copy":
            gpu = dst if op == "h2d" else src
        else:
            gpu = src if isinstance(src, str) else None
        name = str(gpu) if gpu else "-"
    else:
        name = f"{src}->{dst}" if src or dst else "-"
    return f"{node}:{name}" if multi_host else name
