"""What else is known about the GPUs a localization named: the pre-flight's NVML reading
(other processes, clocks held down) and gpulane doctor's findings for those GPUs, in one
line beside the check ("GPU2 runs pid 1967 (python3, 100 %, 1.9 GiB) and its clocks are
held at its power cap")."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gpulane.topology.gpu_state import GPU_STATE_FILE


def gpu_words(run_dirs: Iterable[Path]) -> dict[str, str]:
    """GPU -> what the pre-flight saw on it (other processes, clocks held down), from the
    ``gpu_state.json`` of each run directory (before the run; after when before said
    nothing); GPUs with nothing to say are left out."""
    out: dict[str, str] = {}
    for d in run_dirs:
        try:
            saved = json.loads((d / GPU_STATE_FILE).read_text())
        except (OSError, ValueError):
            continue
        for when in ("before", "after"):
            for g in (saved.get(when) or {}).get("gpus") or []:
                if g.get("words") and g["name"] not in out:
                    out[g["name"]] = str(g["words"])
    return out


def doctor_words(findings: Sequence[dict[str, Any]], gpu: str, known: str = "") -> list[str]:
    """The doctor's findings about ``gpu`` (subject GPU2, or a title that starts with it),
    less those that say again what the NVML words ``known`` say (its foreign processes,
    its clocks held down)."""
    out = []
    for f in findings:
        subject = str(f.get("subject") or "")
        title = str(f.get("title") or "")
        if not (subject == gpu or title.startswith(f"{gpu}:") or title.startswith(f"{gpu} ")):
            continue
        check = str(f.get("check") or "")
        if known and (
            (check == "foreign" and " runs pid " in known)
            or (check == "clocks" and "clocks held down" in title and "its clocks are" in known)
        ):
            continue
        out.append(f"doctor [{f.get('severity')}] {title}")
    return out


def beside(gpus: Sequence[str], states: dict[str, str], findings: Sequence[dict[str, Any]]) -> str:
    """One sentence of evidence for the named GPUs ("" when nothing is known)."""
    parts: list[str] = []
    for g in gpus:
        if g in states:
            parts.append(states[g])
        parts += doctor_words(findings, g, states.get(g, ""))
    return "; ".join(parts)
