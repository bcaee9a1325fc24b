"""Where a measured figure falls against the reference table, in one line of words.

A figure is only ever judged against an entry for the same machine: the GPU model its
rows carry (``versions["gpu"]``), the same path label, world size, node count and op,
a size inside the entry's band, and the same NCCL switches. NCCL version and NVLS are
compared when both sides know them; when the rows do not say, the line says so. A figure
no entry matches says "no reference", naming what it was looked up by.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpulane.analysis.reference.table import (
    ANY_GPU,
    METRIC_OF_KIND,
    NEUTRAL_ENV,
    ORIGINS,
    UNITS,
    Entry,
    ReferenceTable,
    model_key,
    short_model,
)
from gpulane.record import Row, frame_rows
from gpulane.units import format_size

NORMAL, BELOW, ABOVE, MEETS, SHORT, NONE, SELF = (
    "normal",
    "below",
    "above",
    "meets",
    "short",
    "none",
    "self",  # the only reference is a range made from this very run
)


@dataclass(frozen=True)
class Facts:
    """What a figure's rows say about the machine and conditions it was measured on."""

    gpu: str | None
    path: str | None
    world_size: int | None
    nodes: int
    kind: str
    op: str
    size: int | None
    nccl: str | None
    nvls: bool | None
    env: tuple[tuple[str, str], ...]
    memory: str | None = None
    graph: bool | None = None
    link: str | None = None  # copies: "PCIe Gen5 x16" (from the row's extra.link)
    host_memory: str | None = None  # copies: "local" or "remote" host memory (NUMA)
    p2p: bool | None = None  # collectives: False under NCCL_P2P_DISABLE=1; copies: peer access
    bidirectional: bool = False  # copies: both directions at once (DESIGN: one unless said)

    def machine(self, size: bool = True) -> str:
        model = short_model(self.gpu) if self.gpu else "unknown GPU"
        n = f"{self.world_size}× " if self.world_size else ""
        nodes = f"{self.nodes} nodes × " if self.nodes > 1 else ""
        text = f"{nodes}{n}{model} {self.path or 'unknown path'}"
        if self.env:
            text += " " + " ".join(f"{k}={v}" for k, v in self.env)
        if self.link:
            text += f" {self.link}"
        if self.memory:
            text += f" {self.memory}"
        if self.host_memory:
            text += f" {self.host_memory}"
        shown = f" {format_size(self.size)}" if size and self.size is not None else ""
        return f"{text} {self.op}{shown}"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return str(value)


def _int(value: Any) -> int | None:
    text = _text(value)
    return int(float(text)) if text is not None else None


def nvls_state(env: Mapping[str, Any], transport: Any, extra: Mapping[str, Any]) -> bool | None:
    """NVLS on (True), off (False) or unknown (None), from what the rows recorded."""
    if "NVLS" in (_text(transport) or ""):
        return True
    nccl = extra.get("nccl") if isinstance(extra, Mapping) else None
    counts = nccl.get("channel_counts") if isinstance(nccl, Mapping) else None
    nvls_channels = counts.get("nvls") if isinstance(counts, Mapping) else None
    if isinstance(nvls_channels, (int, float)) and nvls_channels > 0:
        return True
    flag = env.get("NCCL_NVLS_ENABLE") if isinstance(env, Mapping) else None
    if flag is not None:
        return str(flag).strip() not in ("0", "false", "False")
    if isinstance(counts, Mapping) and counts.get("nvls") == 0:
        return False
    return None


def facts_of(row: Row) -> Facts:
    versions = row.versions if isinstance(row.versions, Mapping) else {}
    env = row.env if isinstance(row.env, Mapping) else {}
    extra = row.extra if isinstance(row.extra, Mapping) else {}
    assert isinstance(versions, Mapping) and isinstance(env, Mapping)
    shaping = tuple(
        sorted(
            (str(k), str(v))
            for k, v in env.items()
            if str(k).startswith("NCCL_") and str(k) not in NEUTRAL_ENV
        )
    )
    return Facts(
        gpu=_text(versions.get("gpu")),
        path=_text(row.path),
        world_size=_int(row.world_size),
        nodes=_int(row.nodes) or 1,
        kind=str(row.kind),
        op=str(row.op),
        size=_int(row.size_bytes),
        nccl=_text(versions.get("nccl")),
        nvls=nvls_state(env, row.transport, extra or {}),
        env=shaping,
        memory=_text(row.memory),
        graph=row.graph if isinstance(row.graph, bool) else None,
        link=_pcie_link(extra),
        host_memory=_text(extra.get("host_memory")),
        p2p=row.peer_access
        if row.kind == "copy" and isinstance(row.peer_access, bool)
        else p2p_state(env, row.transport),
        bidirectional=row.bidirectional is True,
    )


def p2p_state(env: Mapping[str, Any], transport: Any) -> bool | None:
    """GPU peer-to-peer on (True), off (False) or unknown, from the switch or NCCL's own
    transport line (``P2P/CUMEM`` on; ``SHM``/``NET`` only: off)."""
    if str(env.get("NCCL_P2P_DISABLE", "")).strip() == "1":
        return False
    used = _text(transport) or ""
    if "P2P" in used:
        return True
    return False if ("SHM" in used or "NET" in used) else None


def _pcie_link(extra: Mapping[str, Any]) -> str | None:
    gen, width = _int(extra.get("pcie_gen")), _int(extra.get("pcie_width"))
    if gen and width:
        return f"PCIe Gen{gen} x{width}"
    label = _text(extra.get("link"))
    return label if label and label.startswith("PCIe Gen") and "(" not in label else None


def matches(entry: Entry, facts: Facts) -> bool:
    """Whether ``entry`` holds for a figure with these facts (never another machine)."""
    if not any_gpu(entry) and (
        facts.gpu is None or model_key(facts.gpu) not in {model_key(g) for g in entry.gpu}
    ):
        return False
    if entry.link is not None and entry.link != facts.link:
        return False
    if entry.host_memory and facts.host_memory and entry.host_memory != facts.host_memory:
        return False
    if entry.p2p is not None and facts.p2p is not None and entry.p2p != facts.p2p:
        return False
    if entry.kind == "copy" and bool(entry.bidirectional) != facts.bidirectional:
        return False  # one direction and both at once are two measurements
    if entry.path != "*" and entry.path != facts.path:
        return False
    if entry.world_size and entry.world_size != facts.world_size:
        return False
    if entry.nodes != facts.nodes:
        return False
    if entry.memory is not None and entry.memory != facts.memory:
        return False
    if entry.graph is not None and facts.graph is not None and entry.graph != facts.graph:
        return False
    if (entry.kind, entry.op) != (facts.kind, facts.op):
        return False
    if facts.size is None or not entry.size_min <= facts.size <= entry.size_max:
        return False
    if entry.kind == "collective" and entry.env != facts.env:
        return False
    if entry.nccl and facts.nccl and not _same_version(facts.nccl, entry.nccl):
        return False
    return not (entry.nvls is not None and facts.nvls is not None and entry.nvls != facts.nvls)


def any_gpu(entry: Entry) -> bool:
    """An entry for every GPU model on its link (``gpu: ["*"]``)."""
    return ANY_GPU in entry.gpu


def _same_version(version: str, band: str) -> bool:
    """``2.28.9`` is in ``2.28`` (a prefix) and in ``2.23-2.28`` (a band of releases, by
    major.minor, both ends included)."""
    if "-" in band:
        low, _, high = band.partition("-")
        have = _release(version)
        return have is not None and (_release(low) or ()) <= have <= (_release(high) or ())
    return version == band or version.startswith(band + ".")


def _release(version: str) -> tuple[int, int] | None:
    parts = version.strip().split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def _rank(entry: Entry) -> tuple[int, int, int, int]:
    # Site first, then gpulane's measured runs, then published figures, then thresholds;
    # within an origin this GPU's own figures before a figure of the link, a figure of
    # this path label before one for any path, then the narrowest size band.
    return (
        ORIGINS.index(entry.origin),
        int(any_gpu(entry)),
        int(entry.path == "*"),
        entry.size_max - entry.size_min,
    )


@dataclass(frozen=True)
class Judgement:
    value: float
    unit: str
    status: str  # normal, below, above, meets, short, none
    facts: Facts
    entry: Entry | None
    also: int = 0  # further entries that hold
    nearest: str = ""  # with no reference: the nearest figure, and how it differs
    self_source: str = ""  # an entry made from this run that was left out (its source)

    @property
    def fallback(self) -> str:
        """How the entry differs from the measured machine ("" when it is the same)."""
        if self.entry is None or not any_gpu(self.entry):
            return ""
        return "same link, other GPU" if self.facts.gpu else "same link, GPU not named"

    @property
    def judged(self) -> bool:
        return self.entry is not None

    def text(self) -> str:
        v = f"{self.value:.3g} {self.unit}" if self.value < 100 else f"{self.value:.0f} {self.unit}"
        e = self.entry
        if self.status == SELF:
            return (
                f"{v}: reference is this run itself (the range of {self.self_source} was "
                f"made from this run), not an independent figure; no other reference for "
                f"{self.facts.machine()}"
            )
        if e is None:
            near = f"; nearest: {self.nearest}" if self.nearest else "; no figure of this op"
            return f"{v}: no reference for {self.facts.machine()}{near}"
        runs = f", {e.runs} run{'s' if e.runs != 1 else ''}" if e.runs else ""
        notes = []
        if e.nccl and not self.facts.nccl:
            notes.append("the rows do not name their NCCL version")
        if e.nvls is not None and self.facts.nvls is None:
            notes.append("the rows do not say whether NVLS was on")
        if e.p2p is not None and self.facts.p2p is None:
            notes.append("the rows do not say whether P2P was on")
        if self.fallback:
            notes.append(f"{self.fallback}: no figure for this GPU, used {e.source}'s")
        if self.self_source:
            notes.append(f"{self.self_source}'s range is this run itself, left out")
        note = f"; {'; '.join(notes)}" if notes else ""
        also = f"; {self.also} more in `gpulane reference list`" if self.also else ""
        if e.high is None:
            word = "meets" if self.status == MEETS else "is BELOW"
            return (
                f"{v}, {word} the {e.source} threshold for {e.machine()} "
                f"(≥ {e.low:g} {self.unit} at {e.band()}; {e.cite}{note}){also}"
            )
        word = {NORMAL: "normal", BELOW: "BELOW normal", ABOVE: "above normal"}[self.status]
        return (
            f"{v}, {word} for {e.machine()} ({e.low:g}–{e.high:g} at {e.band()}{runs}; "
            f"{e.source}: {e.cite}{note}){also}"
        )


def judge(
    value: float, facts: Facts, table: ReferenceTable, metric: str, run_id: str | None = None
) -> Judgement:
    """Where ``value`` falls against the best entry for ``facts``. An entry made from the
    run ``run_id`` itself is never the verdict's basis: the next independent one is, or
    the verdict says that the only reference is this run."""
    unit = UNITS.get(metric, "")
    found = candidates(facts, table, metric)
    own = [e for e in found if run_id and run_id in e.run_ids]
    independent = [e for e in found if e not in own]
    if not independent:
        if own:
            return Judgement(value, unit, SELF, facts, own[0], self_source=own[0].source)
        return Judgement(value, unit, NONE, facts, None, nearest=nearest(facts, table, metric))
    e = independent[0]
    if e.high is None:
        status = MEETS if value >= e.low else SHORT
    else:
        status = NORMAL if e.low <= value <= e.high else BELOW if value < e.low else ABOVE
    left_out = own[0].source if own and _rank(own[0]) <= _rank(e) else ""
    return Judgement(value, unit, status, facts, e, also=len(independent) - 1, self_source=left_out)


def candidates(facts: Facts, table: ReferenceTable, metric: str) -> list[Entry]:
    """The entries that hold for ``facts``, best first (see ``_rank``)."""
    entries = table.for_figure(metric, facts.kind, facts.op)
    key = ("candidates", facts, metric)
    if key not in table.memo:
        table.memo[key] = sorted((e for e in entries if matches(e, facts)), key=_rank)
    found: list[Entry] = table.memo[key]
    return found


# How far an entry is from a figure, key by key: the nearest is the one with the least
# weight of differences; GPU model and link first, as they decide the figure most.
_WEIGHTS = (
    ("other GPU", 8),
    ("other link", 6),
    ("other node count", 6),
    ("other count", 4),
    ("other path", 4),
    ("other NCCL switches", 2),
    ("P2P other", 2),
    ("other direction", 3),
    ("other memory", 2),
    ("other size", 1),
    ("other NCCL version", 1),
)


def differences(entry: Entry, facts: Facts) -> list[str]:
    """What ``entry`` was measured on that ``facts`` were not, in words."""
    out = []
    if not any_gpu(entry) and (
        facts.gpu is None or model_key(facts.gpu) not in {model_key(g) for g in entry.gpu}
    ):
        out.append("other GPU")
    if entry.link is not None and entry.link != facts.link:
        out.append("other link")
    if entry.nodes != facts.nodes:
        out.append("other node count")
    if entry.world_size and entry.world_size != facts.world_size:
        out.append("other count")
    if entry.path != "*" and entry.path != facts.path:
        out.append("other path")
    if entry.kind == "collective" and entry.env != facts.env:
        out.append("other NCCL switches")
    if entry.p2p is not None and facts.p2p is not None and entry.p2p != facts.p2p:
        out.append("P2P other")
    if entry.kind == "copy" and bool(entry.bidirectional) != facts.bidirectional:
        out.append("other direction")
    if (entry.memory is not None and entry.memory != facts.memory) or (
        entry.host_memory and facts.host_memory and entry.host_memory != facts.host_memory
    ):
        out.append("other memory")
    if facts.size is None or not entry.size_min <= facts.size <= entry.size_max:
        out.append("other size")
    if entry.nccl and facts.nccl and not _same_version(facts.nccl, entry.nccl):
        out.append("other NCCL version")
    return out


def nearest(facts: Facts, table: ReferenceTable, metric: str) -> str:
    """``same GPU, other count: 8× GeForce RTX 5090 PIX 28–35 at ≥ 1 GiB (NVIDIA/nccl#1639)``:
    the entry nearest to a figure that has none, named and never used for a verdict."""
    key = ("nearest", facts, metric)
    if key not in table.memo:
        table.memo[key] = _nearest(facts, table, metric)
    text: str = table.memo[key]
    return text


def _nearest(facts: Facts, table: ReferenceTable, metric: str) -> str:
    weight = dict(_WEIGHTS)
    best: tuple[int, list[str], Entry] | None = None
    for e in table.for_figure(metric, facts.kind, facts.op):
        diffs = differences(e, facts)
        score = sum(weight[d] for d in diffs)
        if best is None or score < best[0]:
            best = (score, diffs, e)
    if best is None:
        return ""
    _, diffs, e = best
    same = "same GPU" if "other GPU" not in diffs and not any_gpu(e) else ""
    same = same or ("same link" if e.link and "other link" not in diffs else "")
    how = ", ".join([s for s in (same,) if s] + diffs) or "same machine"
    rng = f"≥ {e.low:g}" if e.high is None else f"{e.low:g}–{e.high:g}"
    return f"{how}: {e.machine()} {e.op} {rng} {e.unit} at {e.band()} ({e.source})"


def judge_frame(
    frame: pd.DataFrame, table: ReferenceTable, by: tuple[str, ...] = ("run_id",)
) -> list[tuple[dict[str, Any], Judgement]]:
    """One judgement per figure (rows of one run, figure and path; in-place and
    out-of-place rows together, their median), in the frame's order."""
    out: list[tuple[dict[str, Any], Judgement]] = []
    if frame.empty:
        return out
    ok = frame[(frame["status"] == "ok") & frame["kind"].isin(list(METRIC_OF_KIND))]
    ok = ok[ok["kind"] != "tokens"].reset_index(drop=True)
    keys = [*by, "build", "kind", "op", "world_size", "nodes", "path", "graph", "size_bytes"]
    keys = [k for k in keys if k in ok.columns]
    if ok.empty:
        return out
    # one value column (each kind's metric) and one group number per row, so the medians
    # and first rows come from two vectorised passes, not a frame slice per figure
    value = pd.Series(float("nan"), index=ok.index)
    for kind, metric in METRIC_OF_KIND.items():
        if metric in ok.columns:
            mine = ok["kind"] == kind
            value[mine] = pd.to_numeric(ok.loc[mine, metric], errors="coerce")
    gid = (
        pd.DataFrame({k: ok[k].astype(str) for k in keys})
        .groupby(keys, sort=False, dropna=False)
        .ngroup()
    )
    medians = value.groupby(gid).median()
    heads = ok.iloc[gid.drop_duplicates().index]
    # one Row per figure, made in one pass (a Row per group costs a frame conversion each)
    for row, record, g in zip(
        frame_rows(heads), heads.to_dict("records"), gid[heads.index], strict=True
    ):
        median = medians.get(g)
        if median is None or not math.isfinite(float(median)):
            continue
        first = {str(k): v for k, v in record.items()}
        metric = METRIC_OF_KIND[str(row.kind)]
        run_id = _text(first.get("run_id"))
        out.append((first, judge(float(median), facts_of(row), table, metric, run_id)))
    return out
