"""Each command's configuration: the keys of conf/<command>.yaml, typed. Keys that take a
value or a list (collectives, dtype, batch) or a word or a number (ranks=auto|N) are
``Any`` here and checked by the code that reads them, before any rank starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from gpulane.config.common import CommonConfig, SizesConfig


@dataclass
class SweepConfig(CommonConfig):
    backend: Any = MISSING  # a conf/backend option (config.backend)
    launcher: Any = MISSING  # a conf/launcher option (config.launcher)
    preset: Any = MISSING  # conf/preset
    collectives: Any = field(default_factory=lambda: ["all_reduce"])
    sizes: SizesConfig = field(default_factory=SizesConfig)
    dtype: Any = "float"
    redop: str = "sum"
    root: int = 0
    in_place: Any = "both"
    warmup: int = 5
    iters: int = 20
    check_iters: int = 1
    graph: bool = False
    graph_launches: int = 10
    torch_overhead: Any = "auto"  # auto, true or false; saved as true or false
    ranks: Any = "auto"
    device: str = "auto"
    resume: Any = None
    corrupt_rank: int | None = None
    skip_rank: int | None = None
    # Localization inside the node (campaigns/localize): pairs, halving or ring measure
    # the first collective on subsets of the GPUs instead of sweeping sizes.
    localize: Any = None
    localize_tolerance: float = 0.8
    localize_node_failed: bool = False  # set by accept: the node-level check failed
    # Debugging keys (like corrupt_rank): a real slowdown planted for localization tests.
    slow_rank: int | None = None
    slow_pair: Any = None
    slow_ms: float = 20.0


@dataclass
class CopyConfig(CommonConfig):
    gpus: Any = "all"
    sizes: SizesConfig = field(default_factory=lambda: SizesConfig(min="4K", max="1G"))
    directions: Any = field(default_factory=lambda: ["h2d", "d2h", "bidir"])
    memory: Any = field(default_factory=lambda: ["pageable", "pinned", "pinned-wc"])
    numa: Any = "local"
    all_gpus: bool = True
    peer: bool = True
    peer_access: Any = field(default_factory=lambda: [False, True])
    peer_bidirectional: bool = True
    latency: bool = True
    latency_size: Any = 16
    samples: int = 10
    warmup: int = 2
    min_sample_bytes: Any = "1M"
    max_reps: int = 64
    check: bool = True
    engine: str = "auto"
    plot: bool = True
    device: str = "cuda"


@dataclass
class VllmConfig:
    model_path: str | None = None
    load_format: str = "dummy"
    extra_args: list[str] = field(default_factory=list)


@dataclass
class TokensConfig(CommonConfig):
    model: Any = MISSING  # conf/model: checked by inference.shapes.shape_from_config
    preset: Any = MISSING
    engine: str = "gpulane"
    tp: Any = "auto"
    pp: int = 1
    batch: Any = field(default_factory=lambda: [1, 8, 32])
    input_len: Any = field(default_factory=lambda: [512, 2048])
    output_len: Any = field(default_factory=lambda: [128])
    layers: int | None = None
    micro_batches: Any = "auto"
    dtype: str = "bf16"
    graph: bool = True
    prefill_graph: bool = True
    decode_attention: str = "bmm"
    compile: Any = "auto"  # auto (on GPUs), true or false: gpulane.inference.fused
    compile_mode: str = "default"
    comm_off: bool = True
    device: str = "auto"
    warmup: int = 1
    iters: int = 3
    prefill_chunk_tokens: int = 16384
    memory_fraction: float = 0.92
    seed: int = 0
    dump_logits: bool = False
    profile: bool = False
    vllm: VllmConfig = field(default_factory=VllmConfig)
    # facts of the run, saved for the ranks
    shape: Any = None
    full_layers: int | None = None


@dataclass
class SuiteConfig:
    sweep: bool = True
    collectives: list[str] = field(default_factory=lambda: ["all_reduce", "all_gather"])
    sizes_min: Any = 8
    sizes_max: Any = "auto"
    sweep_overrides: list[str] = field(default_factory=list)
    copy: Any = "auto"
    copy_overrides: list[str] = field(default_factory=list)
    topo: Any = "auto"
    topo_args: list[str] = field(default_factory=list)
    tokens: bool = False
    tokens_overrides: list[str] = field(default_factory=list)
    # Localization inside the node when a node-level collective check fails (auto),
    # always, or never; with which pattern (pairs, halving, ring), and more overrides
    # for its `gpulane sweep localize=...` (campaigns/localize/hook).
    localize: str = "auto"
    localize_pattern: str = "pairs"
    localize_overrides: list[str] = field(default_factory=list)


@dataclass
class AcceptConfig(CommonConfig):
    rules: Any = MISSING  # conf/rules: checked by analysis.rules
    preset: Any = MISSING
    launcher: Any = MISSING  # conf/launcher: where the suite's sweep runs (a campaign on Slurm)
    run: Any = None
    topology: str = "auto"
    baseline: str | None = None
    save_baseline: str | None = None
    out: str | None = None
    junit: bool = True
    html: bool = True
    format: str = "table"
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    doctor: Any = "auto"  # auto, live or false (campaigns/accept/findings)
    # facts of the group, saved beside its runs
    gpus: int | None = None
    kind: str | None = None


@dataclass
class AdviseConfig(CommonConfig):
    model: Any = MISSING
    gpus: Any = "auto"
    batch: Any = field(default_factory=lambda: [1, 32])
    input_len: Any = field(default_factory=lambda: [2048])
    output_len: Any = field(default_factory=lambda: [256])
    dtype: str = "bf16"
    run: Any = None
    measure: bool = False
    topology: str = "auto"
    what_if: str | None = None
    gpu: str = "auto"
    hbm_gbps: float | None = None
    tflops: float | None = None
    memory_gib: float | None = None
    calibrate: bool = True
    micro_batches: Any = "auto"
    prefill_chunk_tokens: int = 16384
    memory_fraction: float = 0.92
    format: str = "table"
    gpu_specs: dict[str, Any] = field(default_factory=dict)
    projection: Any = None


COMMANDS = {
    "sweep": SweepConfig,
    "copy": CopyConfig,
    "tokens": TokensConfig,
    "accept": AcceptConfig,
    "advise": AdviseConfig,
}
