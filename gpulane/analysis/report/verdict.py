"""The compare page's verdict in two lines, computed from the rows.

Line 1, per build against the first (the reference): the collective busbw ratio at
64 MiB and up (the geometric mean over the shared figures there; at the largest shared
size when none reaches 64 MiB), and the change in token rate of the tensor-parallel split
at the largest batch both builds ran, decode and prefill:
``pcie-host: all_reduce busbw 0.08× nvlink at ≥ 64 MiB (±2 % over 8 sizes); TP=2 decode
−15 %, prefill −49 % at batch 16``: the noise beside the ratio is the scatter of the ratios
it is the mean of, and a ratio within it reads "within noise".

Line 2, which split of the GPUs was faster on each build, per phase, where the rows hold
more than one split at one batch (``decode: TP=2 on nvlink, pcie-host; PP=2 on socket``);
and the advisor's pick per build when the caller passes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from gpulane.analysis.compare import Comparison
from gpulane.analysis.plots import split_name
from gpulane.units import format_size

BIG = 64 << 20  # "at >= 64 MiB": where a link's bandwidth, not its latency, shows
MINUS = "\u2212"


def _ratio_text(r: float) -> str:
    return f"{r:.2g}×" if r < 10 else f"{r:.0f}×"


def _pct_text(r: float) -> str:
    pct = 100.0 * (r - 1.0)
    sign = MINUS if pct < 0 else "+"
    return f"{sign}{abs(pct):.0f} %"


def _geomean(values: pd.Series) -> float | None:
    vals = [float(v) for v in values.dropna() if float(v) > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def collective_change(cmp: Comparison, label: str) -> str | None:
    t = cmp.table
    t = t[(t["kind"] == "collective") & (t["metric"] == "busbw_gbps")]
    if t.empty:
        return None
    ops = list(t["op"].unique())
    op = "all_reduce" if "all_reduce" in ops else str(t["op"].value_counts().index[0])
    rows = t[(t["op"] == op) & t[f"ratio:{label}"].notna() & (t[label] > 0)]
    if rows.empty:
        return None
    big = rows[rows["size_bytes"] >= BIG]
    if len(big):
        where = f"at ≥ {format_size(BIG)}"
    else:
        top = rows["size_bytes"].max()
        big, where = rows[rows["size_bytes"] == top], f"at {format_size(int(top))}"
    r = _geomean(big[f"ratio:{label}"])
    if r is None:
        return None
    return (
        f"{op} busbw {_ratio_text(r)} {cmp.labels[0]} {where} ({_noise(big[f'ratio:{label}'], r)})"
    )


def _noise(ratios: pd.Series, r: float) -> str:
    """The ratio's noise, from the scatter of the ratios it is the mean of: "±3 % over 8
    sizes, within noise" (a ratio no further from 1 than its scatter is no difference)."""
    logs = [math.log(float(v)) for v in ratios.dropna() if float(v) > 0]
    if len(logs) < 3:
        return f"noise unknown: {len(logs)} size{'s' if len(logs) != 1 else ''}"
    spread = _log_spread(logs)
    within = abs(math.log(r)) <= math.log1p(spread)
    return f"±{100 * spread:.0f} % over {len(logs)} sizes" + (", within noise" if within else "")


def _log_spread(logs: list[float]) -> float:
    mean = sum(logs) / len(logs)
    return math.exp(math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))) - 1.0


def _tokens(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[(frame["kind"] == "tokens") & (frame["status"] == "ok")]
    rows = rows.dropna(subset=["tokens_per_s"])
    return rows.assign(
        split=[split_name(t, p) for t, p in zip(rows["tp"], rows["pp"], strict=True)]
    )


def tokens_change(cmp: Comparison, label: str) -> str | None:
    """The TP split's decode and prefill change against the reference at the largest
    batch both ran."""
    rows = _tokens(cmp.frame)
    ref = rows[rows["side"] == cmp.labels[0]]
    mine = rows[rows["side"] == label]
    tp = mine[(mine["tp"].fillna(1) > 1) & (mine["pp"].fillna(1) == 1)]
    if tp.empty or ref.empty:
        return None
    split = split_name(tp["tp"].max(), 1)
    keys = ["op", "split", "batch", "model", "input_len", "output_len"]
    a = ref[ref["split"] == split].groupby(keys, dropna=False)["tokens_per_s"].median()
    b = tp[tp["split"] == split].groupby(keys, dropna=False)["tokens_per_s"].median()
    both = pd.concat([a.rename("ref"), b.rename("side")], axis=1).dropna()
    if both.empty:
        return None
    batch = both.index.get_level_values("batch").max()
    at = both[both.index.get_level_values("batch") == batch]
    parts = []
    for phase in ("decode", "prefill"):
        ph = at[at.index.get_level_values("op") == phase]
        if len(ph):
            parts.append(f"{phase} {_pct_text(float((ph['side'] / ph['ref']).median()))}")
    if not parts:
        return None
    at_batch = f" at batch {int(batch)}" if pd.notna(batch) else ""
    return f"{split} {', '.join(parts)}{at_batch}"


def line_one(cmp: Comparison) -> str:
    parts = []
    for label in cmp.labels[1:]:
        said = [x for x in (collective_change(cmp, label), tokens_change(cmp, label)) if x]
        parts.append(
            f"{label}: {'; '.join(said)}"
            if said
            else f"{label}: no figure shared with {cmp.labels[0]}"
        )
    return " · ".join(parts)


def split_winners(frame: pd.DataFrame, labels: list[str]) -> dict[str, dict[str, list[str]]]:
    """phase -> winning split -> builds, at each build's largest batch with 2+ splits."""
    rows = _tokens(frame)
    out: dict[str, dict[str, list[str]]] = {}
    for label in labels:
        mine = rows[rows["side"] == label]
        for phase in ("decode", "prefill"):
            ph = mine[mine["op"] == phase]
            per = ph.groupby(["batch", "split"])["tokens_per_s"].median().reset_index()
            multi = per.groupby("batch")["split"].nunique()
            batches = multi[multi > 1].index
            if not len(batches):
                continue
            at = per[per["batch"] == max(batches)]
            best = str(at.loc[at["tokens_per_s"].idxmax(), "split"])
            out.setdefault(phase, {}).setdefault(best, []).append(label)
    return out


def line_two(cmp: Comparison, advised: Mapping[str, str] | None = None) -> str:
    winners = split_winners(cmp.frame, cmp.labels)
    parts = []
    for phase in ("decode", "prefill"):
        if phase in winners:
            said = "; ".join(f"{s} on {', '.join(b)}" for s, b in winners[phase].items())
            parts.append(f"{phase} faster with {said}")
    text = ("measured at the largest batch: " + " · ".join(parts)) if parts else ""
    if advised:
        picks: dict[str, list[str]] = {}
        for build, split in advised.items():
            picks.setdefault(split, []).append(build)
        advice = "advisor, for throughput: " + "; ".join(
            f"{s} on {', '.join(b)}" for s, b in picks.items()
        )
        text = f"{text} · {advice}" if text else advice
    return text or "no build ran more than one split of its GPUs, and no advice was computed"


def verdict_section(cmp: Comparison, advised: Mapping[str, str] | None = None) -> str:
    from gpulane.analysis.report.html import e

    notes = "".join(f"<li>not compared: {e(n)}</li>" for n in cmp.notes)
    return (
        '<section id="verdict-section"><div class="verdict" id="verdict">'
        f"<p>{e(line_one(cmp))}</p><p>{e(line_two(cmp, advised))}</p></div>"
        + (f'<ul class="warn" id="notes">{notes}</ul>' if notes else "")
        + "</section>"
    )
