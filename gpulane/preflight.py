"""Pre-flight: before any collective, every rank says who it is and what it runs; a world
that does not match the configuration stops with a table of who differs."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from gpulane.errors import InputError

PREFLIGHT_FILE = "preflight.json"
# Facts that must be the same on every rank for the numbers to mean one thing.
SAME_EVERYWHERE = ("gpulane", "torch", "nccl", "mpi4py")


def rank_facts(
    rank: int, host: str, versions: dict[str, str], device: str, gpus_visible: int | None
) -> dict[str, Any]:
    return {
        "rank": rank,
        "host": host,
        "pid": os.getpid(),
        "device": device,
        "gpus_visible": gpus_visible,
        # Where the rank may run: `gpulane doctor --run` holds it against the GPU's NUMA node.
        "cpus": cpu_list(sorted(os.sched_getaffinity(0)))
        if hasattr(os, "sched_getaffinity")
        else None,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        **{k: versions.get(k) for k in (*SAME_EVERYWHERE, "gpu", "cuda")},
    }


def cpu_list(cpus: list[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``0-3,8`` (as the kernel and nvidia-smi write CPU lists)."""
    parts: list[str] = []
    start = prev = None
    for c in [*cpus, None]:
        if c is not None and prev is not None and c == prev + 1:
            prev = c
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = c
    return ",".join(parts)


def world_problems(facts: list[dict[str, Any]], expected_world: int | None) -> list[str]:
    """What is wrong with the world, in words; empty when all is well."""
    problems = []
    if expected_world is not None and len(facts) != expected_world:
        problems.append(f"{len(facts)} ranks arrived, the run is configured for {expected_world}")
    for key in SAME_EVERYWHERE:
        values = Counter(str(f.get(key)) for f in facts if f.get(key) is not None)
        if len(values) > 1:
            common = values.most_common(1)[0][0]
            odd = [f["rank"] for f in facts if f.get(key) is not None and str(f[key]) != common]
            problems.append(f"{key} differs: ranks {odd} run {facts[odd[0]][key]}, others {common}")
    per_host = Counter(f["host"] for f in facts)
    for f in facts:
        visible = f.get("gpus_visible")
        on_gpu = str(f.get("device", "")).startswith("cuda")
        if on_gpu and visible is not None and per_host[f["host"]] > visible:
            problems.append(
                f"{f['host']} runs {per_host[f['host']]} GPU ranks but sees {visible} GPUs"
            )
            break
    return problems


def format_table(facts: list[dict[str, Any]]) -> str:
    cols = ["rank", "host", "pid", "device", "gpus_visible", *SAME_EVERYWHERE, "gpu"]
    rows = [[str(f.get(c, "")) for c in cols] for f in facts]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    line = lambda cells: "  ".join(v.ljust(w) for v, w in zip(cells, widths, strict=True))  # noqa: E731
    return "\n".join([line(cols), *(line(r) for r in rows)])


def check_world(facts: list[dict[str, Any]], expected_world: int | None, run_dir: Path) -> None:
    """On rank 0: record the table, and stop the run when the world is not as configured."""
    (run_dir / PREFLIGHT_FILE).write_text(json.dumps(facts, indent=1))
    problems = world_problems(facts, expected_world)
    if problems:
        raise InputError("pre-flight: " + "; ".join(problems) + "\n" + format_table(facts))
