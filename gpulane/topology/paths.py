"""Path labels as ``nvidia-smi topo -m`` prints them, and how they rank.

Best to worst: ``NV#`` (more bonded links better), then ``PIX`` < ``PXB`` < ``PHB`` <
``NODE`` < ``SYS`` < ``NET`` (a path between nodes). The old ``SOC`` label is read as
``SYS``; callers keep the original text beside it.

:func:`path_label` is the one answer to "which path do these GPUs talk over": the worst
label among their pairs. ``NET`` (ranks on more than one node) is the caller's to say.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol

from gpulane.errors import InputError

PCIE_LABELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
ALL_KINDS = ("nvlink", "pix", "pxb", "phb", "node", "sys", "net")
# Labels older drivers printed, and what they mean today.
LEGACY_LABELS = {"SOC": "SYS"}
SELF = "X"

_NV_RE = re.compile(r"^NV(\d{1,2})$")
_RANK = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "NET": 6}


def nvlink_count(label: str) -> int | None:
    """The number of bonded links of an ``NV#`` label; None for any other label."""
    m = _NV_RE.match(label)
    return int(m.group(1)) if m else None


def is_label(token: str) -> bool:
    """Whether ``token`` is a path label nvidia-smi prints between two devices."""
    n = nvlink_count(token)
    if n is not None:
        return n >= 1
    return token in _RANK or token in LEGACY_LABELS


def normalize_label(label: str) -> str:
    """The label in today's vocabulary (``SOC`` -> ``SYS``); raises on anything else."""
    label = label.strip()
    label = LEGACY_LABELS.get(label, label)
    if not is_label(label):
        raise InputError(
            f"{label!r} is not a path label (expected NV#, PIX, PXB, PHB, NODE, SYS, NET)"
        )
    return label


def label_kind(label: str) -> str:
    """``nvlink``, ``pix``, ``pxb``, ``phb``, ``node``, ``sys`` or ``net``."""
    label = normalize_label(label)
    return "nvlink" if nvlink_count(label) is not None else label.lower()


def label_badness(label: str) -> tuple[int, int]:
    """A sort key, larger is worse: NV18 < NV1 < PIX < ... < SYS < NET."""
    label = normalize_label(label)
    n = nvlink_count(label)
    if n is not None:
        return (0, -n)
    return (_RANK[label], 0)


def worst_label(labels: Iterable[str]) -> str:
    """The worst of some path labels (``NV#`` best, more links better; ``NET`` worst).

    Raises :class:`InputError` when there are none or one is not a label.
    """
    items = [normalize_label(x) for x in labels]
    if not items:
        raise InputError("no path labels to compare")
    return max(items, key=label_badness)


def best_label(labels: Iterable[str]) -> str:
    items = [normalize_label(x) for x in labels]
    if not items:
        raise InputError("no path labels to compare")
    return min(items, key=label_badness)


# NVML's nvmlGpuTopologyLevel_t values and the label nvidia-smi prints for each.
NVML_LEVEL_LABELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def label_from_nvml_level(level: int) -> str | None:
    """Label for an NVML common-ancestor level (INTERNAL counts as PIX: one board)."""
    return NVML_LEVEL_LABELS.get(level)


class _Labelled(Protocol):
    label: str


class _Pairs(Protocol):
    """What :func:`path_label` reads of a Topology (the model imports this module)."""

    def pair(self, a: str, b: str) -> _Labelled | None: ...


def path_label(topo: _Pairs | None, gpus: Sequence[str]) -> str | None:
    """The worst label among the pairs of ``gpus`` (GPU names, as the topology names them).

    None when fewer than two distinct GPUs are given, there is no topology, or a pair's
    label is unknown (a worst label over some of the pairs would be a guess).
    """
    names = list(dict.fromkeys(gpus))
    if topo is None or len(names) < 2:
        return None
    labels: list[str] = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            pair = topo.pair(a, b)
            if pair is None or not pair.label:
                return None
            labels.append(pair.label)
    return worst_label(labels)
