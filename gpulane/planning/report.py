"""What `gpulane advise` prints: the tables of predictions (each figure to the digits its
basis allows, with the basis and the error to expect beside it), the model, the rule of
thumb, and the recommendations; or the same as one JSON document."""

from __future__ import annotations

import sys
from typing import Any

from gpulane.planning.advice import Advice
from gpulane.planning.predict import MODEL_TEXT, RULE_OF_THUMB, Prediction, split_name
from gpulane.planning.uncertainty import rounded

EXPECT_TEXT = (
    "expect: where measured figures fell against predictions of the same basis in the "
    "project's validation tables (benchmarks/advise/README.md; expected_error in "
    "conf/advise.yaml), for tok/s and for ms; figures carry no more digits than that allows"
)
COLUMNS = (
    "split", "GPUs (TP groups)", "mem GiB/GPU", "TTFT ms", "prefill tok/s", "decode tok/s",
    "ITL ms", "all-reduce % dec/pre", "bubble % dec", "basis; expect",
    "rule of thumb (decode)",
)  # fmt: skip


def json_doc(info: dict[str, Any], advice: Advice) -> dict[str, Any]:
    return {
        **info,
        "model_text": MODEL_TEXT,
        "expect_text": EXPECT_TEXT,
        "refused": [{"tp": t, "pp": p, "why": w} for t, p, w in advice.refused],
        "predictions": [p.to_dict() for p in advice.predictions],
        "recommendations": [
            {"input_len": i, "output_len": o, **r.to_dict()} for i, o, r in advice.recommendations
        ],
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def figure(p: Prediction, value: float) -> str:
    """``value`` to the digits the prediction's basis allows."""
    return rounded(value, p.basis.rounding() if p.basis else None)


def _row(p: Prediction) -> list[str]:
    from gpulane.inference.memory import GiB

    mem = f"{p.memory.total / GiB:.1f}"
    if not p.fits or p.decode is None or p.prefill is None:
        return [p.name, p.placement.describe(), mem + " (no fit)", *["-"] * 8]
    path = f" [{p.placement.tp_label}]" if p.placement.tp_label and p.tp > 1 else ""
    basis = p.basis.cell() if p.basis is not None else "-"
    return [
        p.name,
        p.placement.describe() + path,
        mem,
        figure(p, p.prefill.time_ms),
        figure(p, p.prefill.tokens_per_s),
        figure(p, p.decode.tokens_per_s),
        figure(p, p.decode.time_ms),
        f"{_pct(p.decode.allreduce_share)}/{_pct(p.prefill.allreduce_share)}",
        _pct(p.decode.bubble_share),
        basis,
        p.rule_decode.text() if p.rule_decode else "-",
    ]


def _header(console: Any, info: dict[str, Any], lines: list[str]) -> str:
    gpu = info["gpu"]
    head = "PROJECTION (not measured): " if info["projection"] else ""
    console.print(
        f"# gpulane advise: {head}{info['model']} on {info['gpus']} x {gpu['name']}, "
        f"build {info['build']}"
    )
    console.print(f"# topology: {info['topology']}")
    for line in lines:
        console.print(line, soft_wrap=True)  # one line each, paths whole
    if info.get("calibration"):
        for i, line in enumerate(str(info["calibration"]).split("\n")):
            console.print(f"# {'calibration: ' if i == 0 else ''}{line}", markup=False)
    for c in info["compute"]:
        console.print(
            f"# compute: {c} (HBM {gpu['hbm_gbps']:.0f} GB/s, {gpu['tflops']:.0f} TFLOP/s, "
            f"{gpu['memory_gib']:.1f} GiB; {gpu['source']})"
        )
    for k, v in info["collectives"].items():
        console.print(f"# {k} ranks: {v}")
    console.print(f"# {EXPECT_TEXT}", soft_wrap=True)
    return head


def print_tables(info: dict[str, Any], advice: Advice, lines: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    preds = advice.predictions
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 240)
    head = _header(console, info, lines)
    what = "concurrency" if info.get("concurrency") else "batch"
    for input_len, output_len, batch in sorted(
        {(p.input_len, p.output_len, p.batch) for p in preds}
    ):
        t = Table(title=f"{head}{what} {batch}, input {input_len}, output {output_len}")
        for name in COLUMNS:
            t.add_column(name, justify="left" if name[0] in "sGrb" else "right")
        for p in preds:
            if (p.input_len, p.output_len, p.batch) == (input_len, output_len, batch):
                t.add_row(*_row(p))
        console.print(t)
    for tp, pp, why in advice.refused:
        console.print(f"# {split_name(tp, pp)} not possible: {why}")
    console.print(MODEL_TEXT)
    console.print(
        f"rule of thumb (seed document, shown beside the prediction, not used for it): "
        f"bandwidth the TP all-reduces need to keep up with compute above "
        f"{100 * RULE_OF_THUMB:.0f}% of the link: expect trouble"
    )
    for input_len, output_len, r in advice.recommendations:
        console.print(f"\nrecommended for {r.goal} (input {input_len}, output {output_len}):")
        for line in r.reasons:
            console.print(f"  - {line}")
