"""How long a sweep takes at least, told before it starts: every point's calls at a
bandwidth the path reaches at best. A floor, not a forecast: the run's progress line
gives the ETA from what it measured."""

from __future__ import annotations

from typing import Any

# Best rates per device kind (GB/s) and a call's latency floor (s). CPU: gloo
# between processes of one host (0.4-0.6 GB/s measured on the 2-core test machine; 1.0
# keeps the figure a floor).
RATE_GBPS = {"cpu": 1.0, "cuda": 100.0}
LATENCY_S = {"cpu": 30e-6, "cuda": 8e-6}


def sweep_estimate_s(plan: Any, ranks: int, device: str, cores: int) -> float:
    """Seconds the sweep ``plan`` takes at least on ``ranks`` ranks of ``device``."""
    kind = "cuda" if device == "cuda" else "cpu"
    rate = RATE_GBPS[kind] * 1e9
    timing = plan.timing
    calls = timing.warmup + timing.check_iters
    calls += timing.iters * (timing.graph_launches if timing.graph else 1)
    per_set = sum(LATENCY_S[kind] + size / rate for size in plan.sizes)
    total = calls * per_set * len(plan.collectives) * len(plan.dtypes) * len(plan.placements)
    if kind == "cpu" and ranks > cores:  # the ranks take turns on the cores
        total *= ranks / max(cores, 1)
    return float(total)
