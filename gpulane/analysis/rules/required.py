"""Which checks a machine requires, and what would supply a check that did not run.

A rule's ``required`` says when the check must run for the verdict to be PASS:
``true`` (always), ``false`` (never: it runs when it can), or a list of machine facts that
must all hold, for example ``[gpu, multi_gpu, nvlink]``. The facts (:func:`machine_facts`):

- ``gpu``: the machine has NVIDIA GPUs (the topology lists some, accept counted some, or
  the rows are NCCL collectives or GPU copies);
- ``multi_gpu``: two or more GPUs;
- ``nvlink``: some GPU pair is joined by NVLink (NV# in the topology or a row's path);
- ``pcie_pairs``: some GPU pair is not (PCIe peer-to-peer, or through the host);
- ``multi_node``: rows from more than one host.

A fact that cannot be told (no topology, say) is unknown, and a rule that needs it is not
required: the topology rules, required on every GPU machine, say what is missing instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpulane.topology.model import Topology
from gpulane.topology.paths import nvlink_count, path_label

FACTS = ("gpu", "multi_gpu", "nvlink", "pcie_pairs", "multi_node")
Facts = dict[str, bool | None]


def _gpu_names_in_rows(frame: pd.DataFrame) -> set[str]:
    names: set[str] = set()
    if frame.empty:
        return names
    copies = frame[frame["kind"] == "copy"]
    for col in ("src", "dst"):
        names |= {str(v) for v in copies[col].dropna() if str(v).startswith("GPU")}
    return names


def machine_facts(frame: pd.DataFrame, topology: Topology | None, gpus: int | None = None) -> Facts:
    """What kind of machine the rows (and the topology, and accept's GPU count) are from."""
    counts = [0]
    if gpus:
        counts.append(int(gpus))
    if topology is not None:
        counts.append(len(topology.gpus))
    counts.append(len(_gpu_names_in_rows(frame)))
    # NCCL runs on GPUs only (backend nccl, torch-nccl, nccl-tests)
    nccl = (
        frame[frame["backend"].astype(str).str.lower().str.contains("nccl")]
        if len(frame)
        else frame
    )
    if len(nccl):
        per_node = pd.to_numeric(nccl["world_size"], errors="coerce") / pd.to_numeric(
            nccl["nodes"], errors="coerce"
        ).fillna(1).clip(lower=1)
        counts.append(int(per_node.max()) if per_node.notna().any() else 1)
    n = max(counts)
    known_cpu = gpus == 0 or (topology is not None and not topology.gpus)
    gpu: bool | None = True if n > 0 else (False if known_cpu or len(frame) else None)
    facts: Facts = {"gpu": gpu, "multi_gpu": (n >= 2) if gpu is not None else None}
    labels: list[str] = []
    if topology is not None:
        names = topology.gpu_names()
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                labels.append(path_label(topology, [a, b]) or "?")
    row_paths = {str(p) for p in frame["path"].dropna()} if len(frame) else set()
    has_nv = any(nvlink_count(x) for x in labels) or any(nvlink_count(p) for p in row_paths)
    if topology is not None and len(topology.gpus) >= 2:
        facts["nvlink"] = has_nv
        facts["pcie_pairs"] = any(not nvlink_count(x) for x in labels)
    else:
        facts["nvlink"] = True if has_nv else (False if gpu is False else None)
        facts["pcie_pairs"] = None if gpu is not False else False
    hosts = set(frame["host"].dropna()) if len(frame) else set()
    facts["multi_node"] = len(hosts) > 1
    return facts


def required_here(rule: Mapping[str, Any], facts: Facts) -> bool:
    """Whether the rule must run on this machine (see the module text)."""
    want = rule.get("required", False)
    if isinstance(want, bool):
        return want
    if not want:
        return False
    items = [want] if isinstance(want, str) else list(want)
    return all(facts.get(str(f)) is True for f in items)


def required_text(rule: Mapping[str, Any]) -> str:
    want = rule.get("required", False)
    if want is True:
        return "always"
    if not want:
        return "no"
    items = [want] if isinstance(want, str) else [str(x) for x in want]
    return "on " + " + ".join(items)


# What supplies the rows a rule selects, by row kind.
_SUPPLY_ROWS = {
    "copy": "gpulane copy memory=[pinned] directions=[h2d,d2h] peer_access=[true] (or "
    "`gpulane accept` on the machine, which runs it)",
    "collective": "gpulane sweep collectives=[all_reduce,all_gather] sizes.max=1G (or "
    "`gpulane accept` on the machine)",
    "tokens": "gpulane tokens (or `gpulane accept suite.tokens=true`)",
}
_SUPPLY_INPUT = {
    "topology": "gpulane topo --json > topology.json on the machine, then "
    "`gpulane accept run=DIR topology=topology.json`",
    "baseline": "gpulane accept --baseline NAME (store one first with save_baseline=NAME)",
    "doctor": "gpulane accept doctor=live on the machine",
}
_SUPPLY_CHECK = {
    "nccl_transport": "NCCL's INFO lines: `gpulane sweep` records them; for an nccl-tests "
    "log, rerun it with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV and parse that log",
    "pcie_link": _SUPPLY_INPUT["topology"],
    "p2p_status": _SUPPLY_INPUT["topology"],
}


def supply_hint(rule: Mapping[str, Any], missing_input: str | None) -> str:
    """The command that would give the rule what it lacked (the rule's ``supplied_by``
    first, then by the missing input, the check, the kind of rows it selects)."""
    own = rule.get("supplied_by")
    if own:
        return str(own)
    if missing_input in _SUPPLY_INPUT:
        return _SUPPLY_INPUT[missing_input]
    check = str(rule.get("check"))
    if check in _SUPPLY_CHECK:
        return _SUPPLY_CHECK[check]
    kind = str((rule.get("select") or {}).get("kind") or "")
    if kind in _SUPPLY_ROWS:
        return _SUPPLY_ROWS[kind]
    return "`gpulane accept` on the machine (the full suite)"
