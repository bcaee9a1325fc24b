"""Who a row is about: a GPU, a pair (``GPU0->GPU1``), a node, or all rows."""

from __future__ import annotations

from gpulane.record import Row

PER = ("auto", "gpu", "pair", "node", "all")


def subject_of(row: Row, per: str, multi_host: bool, multi_build: bool = False) -> str:
    """Who a row is about: a GPU, a pair (``GPU0->GPU1``), a node; ``build/`` in front
    when the rows hold more than one build (they are never pooled)."""
    subject = _subject(row, per, multi_host)
    return f"{row.build}/{subject}" if multi_build else subject


def _subject(row: Row, per: str, multi_host: bool) -> str:
    kind, op = row.kind, row.op
    host = row.host if isinstance(row.host, str) else None
    node = host or (str(row.build) if row.build is not None else "-")
    if per == "auto":
        per = ("pair" if op == "p2p" else "gpu") if kind == "copy" else "node"
    if per == "all":
        return "all"
    if per == "node":
        return node
    src, dst = row.src, row.dst
    if per == "gpu":
        if kind == "copy":
            gpu = dst if op == "h2d" else src
        else:
            gpu = src if isinstance(src, str) else None
        name = str(gpu) if gpu else "-"
    else:
        name = f"{src}->{dst}" if src or dst else "-"
    return f"{node}:{name}" if multi_host else name
