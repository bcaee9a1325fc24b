"""The recommended split for latency and for throughput, with the reasons in words: what
the chosen split's step is made of, and how much worse the others are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpulane.planning.predict import Prediction
from gpulane.planning.uncertainty import BASIS_TEXT, rounded, too_close_to_call
from gpulane.topology.paths import label_badness


@dataclass
class Recommendation:
    goal: str  # latency or throughput
    batch: int
    choice: Prediction | None
    reasons: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "goal": self.goal,
            "batch": self.batch,
            "split": self.choice.name if self.choice else None,
            "tp": self.choice.tp if self.choice else None,
            "pp": self.choice.pp if self.choice else None,
            "reasons": list(self.reasons),
        }


def _path_text(label: str | None, gbps: float | None) -> str:
    if label is None:
        return "the measured path"
    return f"{label}" + (f" ({gbps:.0f} GB/s)" if gbps else "")


def route_text(transport: tuple[str, str] | None, label: str | None, gbps: float | None) -> str:
    """How the bytes went: the transport NCCL used where the rows say (and from what),
    else the topology's path label, saying that this is all that is known."""
    if transport is not None:
        what, source = transport
        return f"via {what} ({source}; topology path {label or 'unknown'})"
    return f"over {_path_text(label, gbps)} (topology path; NCCL's transport not recorded)"


def explain(p: Prediction, build: str) -> str:
    """What one split's decode step is made of, in words."""
    d = p.decode
    assert d is not None
    parts = [
        f"{p.name}: decode step {rounded(d.time_ms, p.basis.rounding() if p.basis else None)} ms"
    ]
    pl = p.placement
    if p.tp > 1:
        parts.append(
            f"{100 * d.allreduce_share:.0f}% of it in all-reduce "
            f"{route_text(p.tp_transport, pl.tp_label, pl.tp_gbps)} on {build}"
        )
    if p.pp > 1:
        how = (
            "one micro-batch: the stages take turns"
            if p.micro_batches == 1
            else f"{p.micro_batches} micro-batches, each reading its stage's weights again"
        )
        sends = f"; sends {route_text(p.pp_transport, pl.pp_label, pl.pp_gbps)}" if (
            p.pp_transport is not None
        ) else ""  # fmt: skip
        parts.append(f"{100 * d.bubble_share:.0f}% pipeline bubble and sends ({how}{sends})")
    if p.prefill is not None and p.tp > 1:
        parts.append(f"prefill {100 * p.prefill.allreduce_share:.0f}% in all-reduce")
    return ", ".join(parts)


# What the advisor does not see and a published TP-vs-PP result can turn on: the pick of
# two splits this close is the engine's as much as the build's.
UNSEEN = (
    "the serving engine and its version (CUDA graphs or eager, its scheduler, a custom "
    "all-reduce; vLLM V0 and V1 differ in all three)"
)


def close_call(best: Prediction, margin: float) -> str | None:
    """The words for a pick whose margin over the runner-up is within the error its basis
    had in validation (each figure could be off by that much in either direction of the
    range); None when the margin is wider, or the basis has no error table."""
    basis = best.basis
    err = basis.error if basis else None
    if basis is None or err is None:
        return None
    widest = (1 + err.high) / (1 + err.low)
    if not too_close_to_call(margin, err):
        return None
    return (
        f"too close to call on this basis ({margin:.2f}x, within the {widest:.2f}x that "
        f"{BASIS_TEXT[basis.compute]} figures can differ by): depends on the engine "
        f"version and settings, which the advisor does not see: {UNSEEN}; measure both splits with "
        f"gpulane tokens (or the engine's own benchmark) to decide"
    )


def recommend(
    preds: Sequence[Prediction], batches: Sequence[int], build: str
) -> list[Recommendation]:
    """Latency: the shortest request (TTFT + (output_len - 1) x inter-token latency) at the
    smallest batch. Throughput: the most decode tokens/s at the largest batch."""
    out = []
    for goal, batch in (("latency", min(batches)), ("throughput", max(batches))):
        cands = [p for p in preds if p.batch == batch and p.fits and p.decode is not None]
        if not cands:
            out.append(
                Recommendation(goal, batch, None, [f"no split fits in memory at batch {batch}"])
            )
            continue

        def key(p: Prediction, goal: str = goal) -> tuple[float, float]:
            assert p.decode is not None and p.prefill is not None
            if goal == "latency":
                return (p.request_ms or 0.0, p.decode.time_ms)
            return (-p.decode.tokens_per_s, p.prefill.time_ms)

        ranked = sorted(cands, key=key)
        best = ranked[0]
        assert best.decode is not None and best.prefill is not None
        err = best.basis.rounding() if best.basis else None
        unit = "ms" if goal == "latency" else "tok/s"
        metric = (
            f"{rounded(best.request_ms or 0, err)} ms per request of {best.output_len} tokens"
            if goal == "latency"
            else f"{rounded(best.decode.tokens_per_s, err)} decode tok/s"
        )
        basis = f"; {best.basis.short(unit)}" if best.basis else ""
        reasons = [
            f"{best.name} for {goal} at batch {batch}: {metric} (TTFT "
            f"{rounded(best.prefill.time_ms, err)} ms, {rounded(best.decode.time_ms, err)} ms "
            f"per token{basis})",
            explain(best, build),
        ]
        runner_up = next((o for o in ranked if o is not best), None)
        all_tp = next((o for o in ranked if o.pp == 1 and o.tp > 1), None)
        for other in (runner_up, all_tp if all_tp is not runner_up else None):
            if other is None or other is best:
                continue
            assert other.decode is not None
            worse = (
                (other.request_ms or 0.0) / (best.request_ms or 1.0)
                if goal == "latency"
                else best.decode.tokens_per_s / other.decode.tokens_per_s
            )
            reasons.append(f"vs {explain(other, build)} ({worse:.2f}x worse)")
            if other is runner_up:
                close = close_call(best, worse)
                if close:
                    reasons.append(close)
        pl = best.placement
        if (
            best.tp > 1
            and best.pp > 1
            and pl.tp_label
            and pl.pp_label
            and label_badness(pl.tp_label) < label_badness(pl.pp_label)
        ):
            reasons.append(
                f"{best.name} keeps all-reduce on {best.placement.tp_label} "
                f"({best.placement.describe()}); stages talk over {best.placement.pp_label}"
            )
        refused = [p for p in preds if p.batch == batch and not p.fits]
        for p in refused:
            reasons.append(f"{p.name} does not fit: {p.refused}")
        out.append(Recommendation(goal, batch, best, reasons))
    return out
