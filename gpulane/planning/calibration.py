"""When no ``gpulane tokens`` rows of the model are at hand: a short run of the model
itself (its first N layers, at TP=1 and TP=2, a few decode steps) calibrates the compute
model, run now through ``python -m gpulane tokens`` (``measure=true``, as the collectives
are measured), or named as the exact commands that would calibrate it.

N is the most layers, up to :data:`MAX_LAYERS`, whose weights, cache and activations fit
one GPU at the workloads' largest batch and prompt: the per-layer costs are what the fit
needs, and a cut model keeps its embedding and LM head whole (the roofline counts them).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.analysis.store import find_run_dirs
from gpulane.errors import InputError, RunFailed
from gpulane.inference.memory import OVERHEAD_BYTES, GiB, estimate
from gpulane.inference.shapes import ModelShape, packaged_shape
from gpulane.inference.sharding import check_parallel
from gpulane.session.output import Say, stdout

MAX_LAYERS = 8
OUTPUT_LEN = 16  # decode steps enough for a mean step; the fit reads compute-only times


@dataclass(frozen=True)
class CalibrationPlan:
    model_args: tuple[str, ...]  # how `gpulane tokens` selects the model
    layers: int
    tps: tuple[int, ...]
    batches: tuple[int, ...]
    input_lens: tuple[int, ...]
    build: str

    def args(self, tp: int) -> list[str]:
        return [
            "tokens", *self.model_args, f"layers={self.layers}", f"tp={tp}", "pp=1",
            f"batch={','.join(map(str, self.batches))}",
            f"input_len={','.join(map(str, self.input_lens))}",
            f"output_len={OUTPUT_LEN}", "warmup=1", "iters=2", "comm_off=true",
            # the compute-only step (comm_off) is the home decoder's alone
            "engine=gpulane",
            f"build={self.build}",
        ]  # fmt: skip

    def commands(self) -> list[str]:
        return [shlex.join(["gpulane", *self.args(tp)]) for tp in self.tps]

    def describe(self, shape: ModelShape) -> str:
        tps = " and ".join(f"TP={t}" for t in self.tps)
        return f"{self.layers} of {shape.num_layers} layers of {shape.name} at {tps}"


def model_args(shape: ModelShape, model: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The overrides that make `gpulane tokens` run this model: its packaged name, or its
    config.json; None for a shape written out by hand (no short name to give)."""
    packaged = packaged_shape(shape.name)
    # a packaged model cut to fewer layers (model.num_layers=N) is the same model: the
    # short runs name their own layers= (at most N)
    if packaged is not None and packaged.with_layers(shape.num_layers) == shape:
        return (f"model={shape.name}",)
    if model.get("hf_config"):
        return ("model=hf", f"model.hf_config={model['hf_config']}", f"model.name={shape.name}")
    return None


def plan(
    shape: ModelShape,
    model: Mapping[str, Any],
    gpus: int,
    memory_gib: float,
    batches: Sequence[int],
    input_lens: Sequence[int],
    dbytes: int,
    build: str,
    memory_fraction: float = 0.92,
) -> CalibrationPlan | None:
    """The short runs that would calibrate ``shape``, or None when none fits one GPU."""
    args = model_args(shape, model)
    if args is None:
        return None
    budget = memory_gib * GiB * memory_fraction
    low_layers = min(shape.num_layers, shape.first_dense_layers + 2 if shape.is_moe else 1)
    for layers in range(min(MAX_LAYERS, shape.num_layers), low_layers - 1, -1):
        cut = shape.with_layers(layers)
        need = estimate(
            cut, 1, 1, max(batches), max(input_lens), OUTPUT_LEN, dbytes, overhead=OVERHEAD_BYTES
        )
        if need.total <= budget:
            tps = [1]
            if gpus >= 2:
                try:
                    check_parallel(cut, 2, 1)
                    tps.append(2)
                except InputError:
                    pass
            return CalibrationPlan(
                args, layers, tuple(tps), tuple(batches), tuple(input_lens), build
            )
    return None


def run_now(
    p: CalibrationPlan, results_dir: str | Path, say: Say = stdout
) -> tuple[list[str], float]:
    """The plan's runs (``python -m gpulane tokens``), each said on screen with its
    duration; the run directories they made and the seconds they took."""
    root = Path(results_dir)
    before = set(find_run_dirs(root))
    t0 = time.perf_counter()
    for tp in p.tps:
        args = [*p.args(tp), f"results_dir={root}", "progress=false"]
        say("# calibrating compute: gpulane " + shlex.join(args))
        started = time.perf_counter()
        status = subprocess.call([sys.executable, "-m", "gpulane", *args])
        say(f"#   took {time.perf_counter() - started:.0f} s")
        if status:
            raise RunFailed(f"advise: the calibration run failed (gpulane {shlex.join(args)})")
    made = [str(d) for d in sorted(set(find_run_dirs(root)) - before)]
    return made, time.perf_counter() - t0
