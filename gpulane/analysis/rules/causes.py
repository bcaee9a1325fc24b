"""The likely cause of a figure's FAIL, named in its own line: a GPU that another process
used while it was measured (``no_foreign_work``), that ran throttled or with a downtrained
link (the doctor's ``clocks``/``pcie_link`` findings). A copy on GPU0 that fell 51 % while
another process copied over GPU0's link says so, not only the foreign-work line beside it.

A line names GPUs in its subject (GPU0, GPU0->GPU1, host:GPU2); a node-level line (a
collective's subject is the host) takes the causes of every GPU of that host."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpulane.analysis.rules.model import FAIL, Check

# the doctor's checks whose findings slow a GPU's figures (throttling, a downtrained link)
SLOWING = ("clocks", "pcie_link", "foreign")
# lines that are themselves causes, or are not figures
NOT_FIGURES = ("no_foreign_work", "doctor_findings", "gpus", "suite", "collectives", "localize")
_GPU = re.compile(r"GPU\d+")


def _host_gpu(subject: str) -> tuple[str, str | None]:
    host, _, rest = subject.rpartition(":")
    found = _GPU.search(rest or subject)
    return host or "-", found.group(0) if found else None


def gpu_causes(
    checks: Iterable[Check], findings: Iterable[Mapping[str, Any]] | None
) -> dict[tuple[str, str], list[str]]:
    """(host, GPU) -> the causes in words (host "-" when the line names none)."""
    out: dict[tuple[str, str], list[str]] = {}
    for c in checks:
        if c.rule == "no_foreign_work" and c.status == FAIL:
            host, gpu = _host_gpu(c.subject)
            if gpu is not None:
                words = c.message.split(": ", 1)[-1]
                out.setdefault((host, gpu), []).append(f"another process used {gpu}: {words}")
    for f in findings or []:
        if not isinstance(f, dict):  # a rule set's own findings list of words: no cause
            continue
        if str(f.get("check")) not in SLOWING or str(f.get("severity")) not in ("error", "warning"):
            continue
        seen = _GPU.search(str(f.get("subject") or ""))
        if seen is not None:
            out.setdefault(("-", seen.group(0)), []).append(f"doctor: {f.get('title')}")
    return out


def _for(
    subject: str, causes: dict[tuple[str, str], list[str]], known: Iterable[str] = ()
) -> list[str]:
    named = _GPU.findall(subject)
    host = subject.rpartition(":")[0] if ":" in subject else None
    hosts = {h for h, _ in causes} | {str(h) for h in known}
    out: list[str] = []
    for (h, gpu), words in causes.items():
        if named:  # GPU0, GPU0->GPU1, host:GPU2: that GPU (of that host, when named)
            hit = gpu in named and (host is None or h in ("-", host))
        elif subject in hosts:  # a node-level line on a host: that host's GPUs
            hit = h in ("-", subject)
        else:  # the machine as a whole ("all", "-", a build): every GPU of it
            hit = True
        if hit:
            out += [w for w in words if w not in out]
    return out


def name_causes(
    checks: list[Check],
    findings: Iterable[Mapping[str, Any]] | None,
    hosts: Iterable[str] = (),
) -> None:
    """Append ``likely cause: ...`` to each failed figure line on a GPU that has one;
    ``hosts``: the rows' hosts (a line on one of them takes only that host's causes)."""
    hosts = list(hosts)
    causes = gpu_causes(checks, findings)
    if not causes:
        return
    for c in checks:
        if c.status != FAIL or c.rule in NOT_FIGURES or "likely cause" in c.message:
            continue
        found = _for(c.subject, causes, hosts)
        if found:
            c.message += "; likely cause: " + "; ".join(found)


def verdict_causes(checks: Iterable[Check]) -> list[str]:
    """The distinct likely causes the failed figure lines name, first seen first."""
    out: list[str] = []
    for c in checks:
        if c.status != FAIL or "; likely cause: " not in c.message:
            continue
        for words in c.message.split("; likely cause: ", 1)[1].split("; "):
            if words not in out:
                out.append(words)
    return out
