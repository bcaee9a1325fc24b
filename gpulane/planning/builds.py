"""The advisor's split for each build of a comparison, and the compare page that shows it.

Each build is advised from its own rows: its collective curves (as `gpulane advise
run=...` reads them), its topology, and its token rows, which calibrate compute and give
the batches and request shape to predict at (the configuration's when there are none).
The model is the configuration's (``AdviseConfig.model``; the compare command picks the
one the token rows name). A build the advisor cannot take (no collective rows, an unknown
GPU) gets the reason instead of a split.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from gpulane.analysis.compare import Comparison
from gpulane.analysis.report.compare_page import render_compare
from gpulane.analysis.report.html import details, e, num, section, table
from gpulane.analysis.report.topology import BuildTopology
from gpulane.config.commands import AdviseConfig
from gpulane.errors import GpulaneError
from gpulane.inference.batching import as_list
from gpulane.inference.shapes import shape_from_config
from gpulane.planning.advice import Advice, advise
from gpulane.planning.comm import Comms, MeasuredComm, Projection
from gpulane.planning.compute import gpu_spec
from gpulane.planning.inputs import advise_dtype_bytes, gpu_model
from gpulane.planning.placement import synthetic_topology
from gpulane.planning.predict import Workload
from gpulane.record import Row, frame_rows


@dataclass
class BuildAdvice:
    label: str
    advice: Advice | None
    used: str  # what it was computed from, in words
    why_not: str | None = None

    def pick(self, goal: str = "throughput") -> str | None:
        if self.advice is None:
            return None
        for _i, _o, r in self.advice.recommendations:
            if r.goal == goal and r.choice is not None:
                return r.choice.name
        return None


def _workloads(cfg: AdviseConfig, tokens: pd.DataFrame, model: str) -> list[Workload]:
    mine = tokens[tokens["model"].astype(str) == model] if len(tokens) else tokens
    dbytes = advise_dtype_bytes(str(cfg.dtype))
    if len(mine):
        batches = sorted({int(b) for b in mine["batch"].dropna()}) or as_list(cfg.batch, "batch")
        inputs = sorted({int(x) for x in mine["input_len"].dropna()})[:1] or as_list(
            cfg.input_len, "input_len"
        )
        outputs = sorted({int(x) for x in mine["output_len"].dropna()})[:1] or as_list(
            cfg.output_len, "output_len"
        )
    else:
        batches = as_list(cfg.batch, "batch")
        inputs, outputs = as_list(cfg.input_len, "input_len"), as_list(cfg.output_len, "output_len")
    return [
        Workload(
            int(b),
            int(i),
            int(o),
            dbytes,
            None,
            int(cfg.prefill_chunk_tokens),
            float(cfg.memory_fraction),
        )
        for i in inputs
        for o in outputs
        for b in batches
    ]


def advise_build(cfg: AdviseConfig, side: BuildTopology) -> BuildAdvice:
    """The advice for one build from its rows and topology."""
    frame = side.rows[side.rows["status"] == "ok"]
    coll = frame[frame["kind"] == "collective"]
    if coll.empty:
        return BuildAdvice(side.label, None, "-", "no collective rows to time the splits on")
    shape = shape_from_config(dict(cfg.model))
    topo = side.topology
    gpus = len(topo.gpus) if topo is not None and topo.gpus else int(coll["world_size"].max())
    rows = frame_rows(frame)
    try:
        spec = gpu_spec(dict(cfg.gpu_specs), gpu_model(topo) or _rows_gpu(rows))
        proj = cfg.projection or {}
        comms = Comms(
            MeasuredComm(frame_rows(coll.assign(build=side.label)), side.label),
            Projection(dict(proj.get("efficiency") or {}), dict(proj.get("latency_us") or {})),
        )
        tokens = frame[frame["kind"] == "tokens"]
        workloads = _workloads(cfg, tokens, shape.name)
        calibration = frame_rows(tokens.assign(build=side.label)) if cfg.calibrate else []
        placed = topo if topo is not None else synthetic_topology(gpus, spec.name)
        advice = advise(shape, gpus, placed, comms, spec, workloads, side.label, calibration)
    except GpulaneError as err:
        return BuildAdvice(side.label, None, "-", str(err))
    used = f"{shape.name} on {gpus} x {spec.name}" + (
        ", compute calibrated on the build's token rows" if calibration else ", roofline compute"
    )
    return BuildAdvice(side.label, advice, used)


def _predictions(advice: Advice) -> pd.DataFrame:
    out = []
    for p in advice.predictions:
        d, f = p.decode, p.prefill
        out.append(
            {
                "split": p.name,
                "batch": p.batch,
                "input": p.input_len,
                "output": p.output_len,
                "fits": "yes" if p.fits else f"no: {p.refused}",
                "decode tok/s": num(d.tokens_per_s) if d else "-",
                "ITL ms": num(d.time_ms) if d else "-",
                "prefill tok/s": num(f.tokens_per_s) if f else "-",
                "TTFT ms": num(f.time_ms) if f else "-",
                "all-reduce share dec/pre": "-" if not (d and f)
                else f"{100 * d.allreduce_share:.0f}% / {100 * f.allreduce_share:.0f}%",
            }
        )  # fmt: skip
    return pd.DataFrame(out)


def advice_card(b: BuildAdvice, index: int) -> str:
    head = f"<h3>{e(b.label)}</h3>"
    if b.advice is None:
        return f'<div class="card">{head}<p>No advice: {e(b.why_not)}</p></div>'
    lines = []
    for input_len, output_len, r in b.advice.recommendations:
        choice = r.choice.name if r.choice else "none"
        reasons = "".join(f"<li>{e(x)}</li>" for x in r.reasons)
        lines.append(
            f"<p><b>{e(choice)}</b> for {e(r.goal)} (batch {r.batch}, input {input_len}, "
            f"output {output_len})</p><ul>{reasons}</ul>"
        )
    preds = _predictions(b.advice)
    return (
        f'<div class="card" id="advice-{index}">{head}<p class="meta">{e(b.used)}</p>'
        + "".join(lines)
        + details(
            f"table: predicted splits of {b.label}",
            table(preds, f"table-advice-{index}", left=["split", "fits"])
            + "".join(f'<p class="meta">compute: {e(c)}</p>' for c in b.advice.computes),
        )
        + "</div>"
    )


def _short_reason(why: str | None) -> str:
    """Why a build got no advice, as a reader's sentence: the first line of the reason,
    without the command-line error's prefix or its suggested command line."""
    text = (why or "no reason recorded").strip().splitlines()[0]
    text = re.sub(r"^(gpulane: )?error: ", "", text)
    return text.split("; use ")[0].split(" (try ")[0].rstrip(".")


def advice_section(builds: Sequence[BuildAdvice]) -> str:
    """The advisor's cards, one per build it has an answer for; the builds it has none for
    in one line each, in words (never the raw error of the command line)."""
    answered = [(i, b) for i, b in enumerate(builds) if b.advice is not None]
    unanswered = [b for b in builds if b.advice is None]
    missing = "".join(
        f"<li>{e(b.label)}: no advice ({e(_short_reason(b.why_not))})</li>" for b in unanswered
    )
    body = f'<ul class="meta" id="advice-missing">{missing}</ul>' if missing else ""
    if answered:
        cards = "".join(advice_card(b, i) for i, b in answered)
        intro = (
            "<p>The advisor's prediction of each split from the build's own collective "
            "curves and topology (gpulane advise), calibrated on its token rows where it has "
            "them.</p>"
        )
        body = intro + f'<div class="cards">{cards}</div>' + body
    return section("advice", "Advisor: TP or PP per build", body)


def compare_page(
    cmp: Comparison,
    sides: Sequence[BuildTopology],
    cfg: AdviseConfig | None,
    title: str | None = None,
) -> str:
    """The build comparison page with the advisor's split per build (``cfg`` None: the
    advisor is left out and the page says so)."""
    if cfg is None:
        return render_compare(cmp, sides, title=title)
    builds = [advise_build(cfg, s) for s in sides]
    advised = {b.label: pick for b in builds if (pick := b.pick()) is not None}
    return render_compare(cmp, sides, advice_section(builds), advised, title)


def _rows_gpu(rows: list[Row]) -> str | None:
    """The GPU model the rows' versions name (the topology says none)."""
    for r in rows:
        versions = r.versions
        if isinstance(versions, dict) and versions.get("gpu"):
            return str(versions["gpu"])
    return None
