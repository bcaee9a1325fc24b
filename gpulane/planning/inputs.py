"""What the advisor reads: collective and token rows (run directories, rows files,
nccl-tests logs, run ids or build labels), the topology, the GPU model, and, when
nothing was measured, the collectives measured now by ``gpulane sweep`` in a child
process (planning never imports a command)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpulane.analysis.store import (
    TOPOLOGY_FILE,
    find_run_dirs,
    find_topology,
    load_frame,
)
from gpulane.analysis.store import load_topology as read_topology_file
from gpulane.errors import InputError, RunFailed
from gpulane.inference.shapes import dtype_bytes
from gpulane.record import Row, frame_rows
from gpulane.session.output import Say, stdout
from gpulane.topology.model import Topology

ROWS_SUFFIXES = (".jsonl", ".parquet")
# The sweeps measure_now runs per rank count: (CUDA graphs, largest size). Graph replays
# time what a decode step pays up to 64 MiB; the eager sweep reaches prefill's sizes.
MEASURE_PASSES: tuple[tuple[bool, str], ...] = ((True, "64M"), (False, "1G"))


def paths_of(value: Any) -> list[str]:
    """A list or a comma string of paths (run=), as a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [p for p in value.split(",") if p]
    return [str(p) for p in value]


def load_rows(
    targets: Sequence[str], build: str | None, results_dir: str
) -> tuple[list[Row], list[Path]]:
    """Rows of run directories, rows files, nccl-tests logs, run ids or build labels, as
    :class:`~gpulane.record.Row` (a frame's other columns, run_dir, in ``extra``); and the
    paths they came from (to look for a topology.json beside them)."""
    from gpulane.analysis.store import resolve_targets

    rows: list[Row] = []
    paths: list[Path] = []
    for target in targets:
        p = Path(target)
        if p.is_file() and not p.name.endswith(ROWS_SUFFIXES):
            from gpulane.collectives.nccl_tests.logs import rows_from_file

            label = build or p.stem
            rows += list(rows_from_file(p, build=label))
            paths.append(p)
        elif p.exists():
            rows += frame_rows(load_frame([p]))
            paths.append(p)
        else:
            for _label, frame in resolve_targets([target], results_dir):
                rows += frame_rows(frame)
                paths += [Path(d) for d in sorted(set(frame["run_dir"].dropna()))]
    return rows, paths


def measure_now(
    ranks: Sequence[int],
    build: str,
    results_dir: str | Path,
    device: str = "cuda",
    passes: Sequence[tuple[bool, str]] = MEASURE_PASSES,
    say: Say = stdout,
) -> list[str]:
    """Run ``gpulane sweep`` (``python -m gpulane``) for the collectives the splits need,
    over each of ``ranks``; the run directories it made under ``results_dir``."""
    root = Path(results_dir)
    before = set(find_run_dirs(root))
    for n in sorted(set(ranks)):
        # A pipeline's sends are sendrecv, which torch runs out of place only: with it,
        # each collective is measured in the placements its backend has.
        ops = "[all_reduce,all_gather,sendrecv]" if n == 2 else "[all_reduce,all_gather]"
        placement = "both" if n == 2 else "true"
        for graph, top in passes:
            cmd = [
                sys.executable, "-m", "gpulane", "sweep", f"collectives={ops}",
                "dtype=bfloat16", f"in_place={placement}", f"graph={str(graph).lower()}",
                "sizes.min=8", f"sizes.max={top}", f"ranks={n}", f"device={device}",
                f"build={build}", f"results_dir={root}", "progress=false",
            ]  # fmt: skip
            say("# measuring: " + " ".join(cmd[3:]))
            status = subprocess.call(cmd)
            if status:
                raise RunFailed(f"advise: measuring the collectives failed ({' '.join(cmd[3:])})")
    return [str(d) for d in sorted(set(find_run_dirs(root)) - before)]


def load_topology(spec: str, paths: Sequence[Path]) -> tuple[Topology | None, str]:
    """The topology ``spec`` names (none, live, auto: a topology.json beside the rows, or
    a file), and where it came from in words."""
    if spec == "none":
        return None, "none"
    if spec == "live":
        return probe_live()
    if spec == "auto":
        found = find_topology(paths)
        if found is None:
            return None, "none found beside the rows"
        return read_topology_file(found), str(found)
    return read_topology_file(spec), spec


def probe_live(probe: Callable[[], Topology] | None = None) -> tuple[Topology | None, str]:
    """This machine's topology as ``gpulane topo --json`` probes it (NVML, nvidia-smi,
    lspci, sysfs), and where it came from in words; (None, why) when the probe saw no GPU:
    then the advice says so rather than place ranks on paths nobody read."""
    if probe is None:
        from gpulane.topology.live import probe_topology

        probe = probe_topology
    topo = probe()
    if not topo.gpus:
        seen = "; ".join(topo.missing[:2]) or "no GPU listed"
        return None, f"not probed (no GPU): {seen}"
    unknown = f"; unknown: {len(topo.missing)} source(s), see topology.json" if topo.missing else ""
    return topo, f"live probe of this machine ({len(topo.gpus)} GPUs{unknown})"


def write_beside(topo: Topology, run_dirs: Sequence[str | Path]) -> list[Path]:
    """``topo`` as topology.json (the JSON ``gpulane topo --json`` prints) in each of the
    run directories measured now, where ``topology=auto`` finds it next time."""
    written = []
    text = json.dumps(topo.to_json(), indent=2) + "\n"
    for d in run_dirs:
        p = Path(d)
        if p.is_dir():
            (p / TOPOLOGY_FILE).write_text(text, encoding="utf-8")
            written.append(p / TOPOLOGY_FILE)
    return written


def gpu_model(topo: Topology | None) -> str | None:
    """The GPU model the topology names, if any (the rows' is :mod:`.provenance`'s)."""
    if topo is not None:
        for g in topo.gpus:
            if g.model:
                return g.model
    return None


# fp8 checkpoints (e.g. Llama 3.1 70B FP8 with an fp8 KV cache): 1 byte a weight and a KV
# element. Only the advisor's memory and byte counts take it; gpulane tokens runs bf16.
FP8_NAMES = ("fp8", "fp8_e4m3", "float8_e4m3fn")


def advise_dtype_bytes(dtype: str) -> int:
    """Bytes per element of dtype= for the advisor: gpulane's dtypes, plus fp8 (1)."""
    if str(dtype).lower() in FP8_NAMES:
        return 1
    try:
        return dtype_bytes(dtype)
    except InputError:
        raise InputError(f"dtype: expected bf16, fp16, fp32 or fp8, got {dtype!r}") from None
