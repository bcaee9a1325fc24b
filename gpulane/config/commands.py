"""Each command's configuration: the keys of conf/<command>.yaml, typed. Keys that take a
value or a list (collectives, dtype, batch) or a word or a number (ranks=auto|N) are
``Any`` here and checked by the code that reads them, before any rank starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpulane.config.backend import BackendConfig
from gpulane.config.campaign import CampaignConfig
from gpulane.config.choices import AcceptFormat, AdviseFormat, Device, Engine, OnOff
from gpulane.config.common import CommonConfig, PresetConfig, SizesConfig
from gpulane.config.launcher import LauncherConfig
from gpulane.config.types import (
    AutoOrInt,
    ErrorBands,
    GpuSpecs,
    Ints,
    IntsOrNone,
    IntsOrText,
    Localize,
    Pair,
    PeerAccess,
    Resume,
    Runs,
    Shape,
    Size,
    Switch,
    Words,
)

# OmegaConf's MISSING (a required value) is this string; spelled here so that reading the
# schemas (`--help`) does not load OmegaConf.
MISSING: Any = "???"


@dataclass
class SweepConfig(CommonConfig):
    backend: BackendConfig = MISSING  # a conf/backend option (config.backend)
    """Who runs the collectives: auto, torch, nccl, nccl_tests or mpi (see the groups)"""
    launcher: LauncherConfig = MISSING  # a conf/launcher option (config.launcher)
    """How the ranks start: local, mpirun or slurm (see the groups)"""
    campaign: CampaignConfig = field(default_factory=CampaignConfig)
    """A cluster campaign: campaign.pattern, nodelist, outlier_fraction, dry_run, pack"""
    preset: PresetConfig = MISSING  # conf/preset
    """NCCL transport preset: none, nvlink, pcie-host (through host memory) or socket"""
    collectives: Words = field(default_factory=lambda: ["all_reduce"])
    """all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, sendrecv; a comma list, or all"""
    sizes: SizesConfig = field(default_factory=SizesConfig)
    """Message sizes: sizes.min, sizes.max, sizes.factor or sizes.step"""
    dtype: Words = "float"
    """float, half, bfloat16, double, int8, uint8, int32, int64 (a comma list sweeps)"""
    redop: str = "sum"
    """Reduction: sum, prod, min, max or avg"""
    root: int = 0
    """Root rank of broadcast and reduce"""
    in_place: Switch = "both"
    """both, true (in-place only) or false (out-of-place only)"""
    warmup: int = 5
    """Untimed iterations before each point"""
    iters: int = 20
    """Timed iterations per point"""
    check_iters: int = 1
    """Iterations whose results are checked per point; 0 turns correctness checks off"""
    graph: bool = False
    """Capture the iterations in a CUDA graph and time its replays (GPUs)"""
    graph_launches: int = 10
    """Graph replays timed per point (graph=true)"""
    torch_overhead: Switch = "auto"  # auto, true or false; saved as true or false
    """Also time torch's all_reduce beside nccl's and print what torch adds: auto, true or false"""
    ranks: AutoOrInt = "auto"
    """Number of ranks; auto: one per local GPU when there are 2+, else 2 CPU processes"""
    device: Device = "auto"
    """auto, cuda or cpu"""
    resume: Resume = None
    """A run directory to finish: measures only the points it has no good row for yet"""
    corrupt_rank: int | None = None
    """Self-test: this rank corrupts one received element before each check"""
    skip_rank: int | None = None
    """Self-test: this rank leaves out one collective, so the watchdog must end the run"""
    # Localization inside the node (campaigns/localize): pairs, halving or ring measure
    # the first collective on subsets of the GPUs instead of sweeping sizes.
    localize: Localize = None
    """Measure the first collective on subsets of the GPUs: pairs, halving or ring (docs/localize.md)"""
    localize_tolerance: float = 0.8
    """A subset is slow below this fraction of the best subset of its size"""
    localize_node_failed: bool = False  # set by accept: the node-level check failed
    """Internal: set by accept when the node-level check failed"""
    # Debugging keys (like corrupt_rank): a real slowdown planted for localization tests.
    slow_rank: int | None = None
    """Self-test: this rank sleeps slow_ms before each operation"""
    slow_pair: Pair = None
    """Self-test: these two ranks sleep slow_ms before each operation they share"""
    slow_ms: float = 20.0
    """Self-test: the planted delay in milliseconds"""


@dataclass
class CopyConfig(CommonConfig):
    launcher: LauncherConfig = MISSING  # conf/launcher: the copy's one rank, on this host
    """How the rank starts: local (copies run on this host's GPUs)"""
    gpus: IntsOrText = "all"
    """all, or CUDA device indices: [0,1] or 0,2"""
    sizes: SizesConfig = field(default_factory=lambda: SizesConfig(min="4K", max="1G"))
    """Copy sizes: sizes.min, sizes.max (K/M/G binary, multiples of 4), sizes.factor or sizes.step"""
    directions: Words = field(default_factory=lambda: ["h2d", "d2h", "bidir"])
    """h2d, d2h and bidir (both at once, pinned kinds only)"""
    memory: Words = field(default_factory=lambda: ["pageable", "pinned", "pinned-wc"])
    """Host memory kinds: pageable, pinned, pinned-wc (needs CuPy)"""
    numa: Size = "local"
    """Host buffers on the GPU's NUMA node (local), the other one (remote), none, or a node number"""
    all_gpus: bool = True
    """Also every GPU to/from the host at once, pinned, at sizes.max (2+ GPUs)"""
    peer: bool = True
    """GPU<->GPU copies for every ordered pair (2+ GPUs)"""
    peer_access: PeerAccess = field(default_factory=lambda: [False, True])
    """Peer access off (staged through host) and/or on: [false,true]"""
    peer_bidirectional: bool = True
    """Also both directions of a pair at once"""
    latency: bool = True
    """Measure the p2p latency matrix"""
    latency_size: Size = 16
    """Bytes per latency copy"""
    samples: int = 10
    """Timed samples per point (median and p99)"""
    warmup: int = 2
    """Untimed copies before a point's samples"""
    min_sample_bytes: Size = "1M"
    """A sample repeats a small copy until it moved this much ..."""
    max_reps: int = 64
    """... at most this many times"""
    check: bool = True
    """Compare every destination with the source after the copies"""
    engine: str = "auto"
    """auto (CuPy's cudaMemcpyAsync when importable, else torch), cupy or torch"""
    plot: bool = True
    """Write copy-bandwidth.png in the run directory"""
    device: str = "cuda"
    """cuda (copies need a GPU)"""


@dataclass
class VllmConfig:
    model_path: str | None = None
    """The model directory vllm bench latency runs (engine=vllm)"""
    load_format: str = "dummy"
    """dummy: random weights with the model's shapes, as gpulane's own decoder"""
    extra_args: list[str] = field(default_factory=list)
    """More arguments for vllm bench latency"""


@dataclass
class SglangConfig:
    model_path: str | None = None
    """The model directory sglang.bench_one_batch runs (engine=sglang, or auto)"""
    load_format: str = "dummy"
    """dummy: random weights with the model's shapes, as gpulane's own decoder"""
    extra_args: list[str] = field(default_factory=list)
    """More arguments for sglang.bench_one_batch"""


@dataclass
class TokensConfig(CommonConfig):
    model: Any = MISSING  # conf/model: checked by inference.shapes.shape_from_config
    """A packaged model (llama3-8b, tiny, ...), your file model=PATH.yaml, or a HF config.json path"""
    preset: PresetConfig = MISSING
    """NCCL transport preset: none, nvlink, pcie-host or socket"""
    launcher: LauncherConfig = MISSING  # conf/launcher: tp x pp ranks on this host
    """How the ranks start: local (token runs use this host's GPUs)"""
    engine: Engine = "auto"
    """auto (an installed vllm or sglang with its model_path given, else gpulane), gpulane, vllm or sglang"""
    tp: AutoOrInt = "auto"
    """Tensor-parallel ranks; auto: the local GPUs / pp (1 on CPUs)"""
    pp: int = 1
    """Pipeline stages"""
    batch: Ints = field(default_factory=lambda: [1, 8, 32])
    """Sequences decoded together: a comma list 1,8,32"""
    input_len: Ints = field(default_factory=lambda: [512, 2048])
    """Prompt lengths in tokens: a comma list"""
    output_len: Ints = field(default_factory=lambda: [128])
    """Generated tokens per sequence: a comma list"""
    layers: int | None = None
    """Run the first N layers only (results scaled up); null: all"""
    micro_batches: AutoOrInt = "auto"
    """Pipeline micro-batches; auto: pp, capped at the batch"""
    dtype: str = "bf16"
    """bf16, fp16 or fp32"""
    graph: bool = True
    """Capture decode steps in CUDA graphs, as vLLM does (GPUs)"""
    prefill_graph: bool = True
    """Time prefills as CUDA-graph replays too (GPUs, pp=1)"""
    decode_attention: str = "bmm"
    """Decode attention: bmm, triton, fused, efficient, cudnn, math or any"""
    compile: Switch = "auto"  # auto (on GPUs), true or false: gpulane.inference.fused
    """Fuse elementwise chains with torch.compile: auto (on GPUs), true or false"""
    compile_mode: str = "default"
    """torch.compile mode: default or max-autotune-no-cudagraphs"""
    comm_off: bool = True
    """Also run with TP collectives as no-ops: compute alone, and the comm share"""
    device: Device = "auto"
    """auto, cuda or cpu"""
    warmup: int = 1
    """Prefills before the timed ones"""
    iters: int = 3
    """Timed prefills per configuration"""
    prefill_chunk_tokens: int = 16384
    """A prefill runs in chunks of whole sequences of at most this many tokens"""
    memory_fraction: float = 0.92
    """Share of the GPU's memory the estimate may use"""
    seed: int = 0
    """Seed of the random weights and tokens"""
    dump_logits: bool = False
    """Save the last stage's logits per configuration (tests)"""
    profile: bool = False
    """Also write a torch.profiler trace of one eager prefill per rank"""
    vllm: VllmConfig = field(default_factory=VllmConfig)
    """engine=vllm settings: vllm.model_path, vllm.load_format, vllm.extra_args"""
    sglang: SglangConfig = field(default_factory=SglangConfig)
    """engine=sglang settings: sglang.model_path, sglang.load_format, sglang.extra_args"""
    # facts of the run, saved for the ranks
    shape: Shape = None
    """Internal: the model's shape, saved for the ranks"""
    full_layers: int | None = None
    """Internal: the model's layer count when layers= runs fewer"""


@dataclass
class SuiteConfig:
    sweep: bool = True
    """Run the collective sweep"""
    collectives: list[str] = field(default_factory=lambda: ["all_reduce", "all_gather"])
    """Collectives the sweep runs"""
    sizes_min: Size = 8
    """Smallest message of the sweep"""
    sizes_max: Size = "auto"
    """Largest message; auto: 1G on GPUs, 32M on CPUs"""
    sweep_overrides: list[str] = field(default_factory=list)
    """More gpulane sweep overrides, e.g. suite.sweep_overrides=[iters=50]"""
    copy: Switch = "auto"
    """Run gpulane copy: auto (when a GPU is visible), true or false"""
    copy_overrides: list[str] = field(default_factory=list)
    """gpulane copy overrides of the suite"""
    topo: Switch = "auto"
    """Run gpulane topo --json: auto (when a GPU is visible), true or false"""
    topo_args: list[str] = field(default_factory=list)
    """More gpulane topo arguments"""
    tokens: bool = False
    """Also run gpulane tokens"""
    tokens_overrides: list[str] = field(default_factory=list)
    """gpulane tokens overrides of the suite"""
    # Localization inside the node when a node-level collective check fails (auto),
    # always, or never; with which pattern (pairs, halving, ring), and more overrides
    # for its `gpulane sweep localize=...` (campaigns/localize/hook).
    localize: str = "auto"
    """Find the GPU or pair behind a failed collective check: auto (on a failure), always or never"""
    localize_pattern: str = "pairs"
    """Subsets measured to localize: pairs, halving or ring"""
    localize_overrides: list[str] = field(default_factory=list)
    """More gpulane sweep overrides for the localization run"""


@dataclass
class AcceptConfig(CommonConfig):
    rules: Any = MISSING  # conf/rules: checked by analysis.rules
    """Rule set: default, base, nvlink or pcie"""
    preset: PresetConfig = MISSING
    """NCCL transport preset of the suite's sweep"""
    launcher: LauncherConfig = (
        MISSING  # conf/launcher: where the suite's sweep runs (a campaign on Slurm)
    )
    """Where the suite's sweep runs: local, mpirun or slurm (a campaign with a pattern)"""
    run: Runs = None
    """Check these rows instead of measuring: a run directory, a group, a rows file"""
    topology: str = "auto"
    """auto (topology.json in the run), a gpulane topo --json file, live, or none"""
    baseline: str | None = None
    """A run directory, or a baseline name under RESULTS_DIR/baselines"""
    save_baseline: str | None = None
    """Store this run as baseline NAME"""
    # rules=/path/rules.yaml (commands/accept maps it here): the user's own rule set
    rules_file: str | None = None
    """Internal: the user's own rules file (give it as rules=PATH.yaml)"""
    # rule ids whose absence is accepted knowingly (accept --allow-skip RULE, repeatable)
    allow_skip: Words = field(default_factory=list)
    """Rule ids whose absence is accepted knowingly (accept --allow-skip RULE)"""
    out: str | None = None
    """Where accept.json, junit.xml and report.html go; null: the run's directory"""
    junit: bool = True
    """Write junit.xml for CI systems"""
    html: bool = True
    """Write a self-contained report.html"""
    format: AcceptFormat = "table"
    """What is printed: table, markdown, json or none"""
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    """The suite: suite.sweep, suite.copy, suite.topo, suite.tokens and their overrides"""
    doctor: Switch = "auto"  # auto, live or false (campaigns/accept/findings)
    """gpulane doctor's checks as rules: auto, live or false"""
    # facts of the group, saved beside its runs
    gpus: int | None = None
    """GPUs this node should have (fewer or more: FAIL); saved: the GPUs the group saw"""
    device: Device = "auto"
    """auto or cuda: a node without GPUs is INCOMPLETE; cpu: accept a CPU node knowingly"""
    kind: str | None = None
    """Internal: the machine kind of the group"""


@dataclass
class AdviseConfig(CommonConfig):
    model: Any = MISSING
    """A packaged model (llama3-70b, ...), your file model=PATH.yaml, or a HF config.json path"""
    gpus: AutoOrInt = "auto"
    """GPUs to split into TP x PP; auto: the topology's, else the local ones"""
    batch: Ints = field(default_factory=lambda: [1, 32])
    """Batch sizes: a comma list 1,32"""
    input_len: Ints = field(default_factory=lambda: [2048])
    """Prompt lengths: a comma list"""
    output_len: Ints = field(default_factory=lambda: [256])
    """Generated tokens: a comma list"""
    dtype: str = "bf16"
    """bf16, fp16 or fp32"""
    run: Runs = None
    """Collective rows of the build: run directories, rows files, nccl-tests logs"""
    measure: bool = False
    """Measure what is missing now (a sweep, a short tokens run) instead of naming it"""
    topology: str = "auto"
    """auto (topology.json beside the rows), a gpulane topo --json file, live, or none"""
    what_if: str | None = None
    """Project an unmeasured build from its topology: pcie:GENxWIDTH or nvlink:LINKS"""
    gpu: str = "auto"
    """A gpu_specs key; auto: the topology's (or the rows') GPU model"""
    hbm_gbps: float | None = None
    """Override: achievable HBM GB/s"""
    tflops: float | None = None
    """Override: achievable dense TFLOP/s at dtype"""
    memory_gib: float | None = None
    """Override: memory per GPU in GiB"""
    calibrate: bool = True
    """Calibrate compute on the token rows under run="""
    micro_batches: AutoOrInt = "auto"
    """Pipeline micro-batches; auto: pp, capped at the batch"""
    prefill_chunk_tokens: int = 16384
    """A prefill runs in chunks of at most this many tokens"""
    memory_fraction: float = 0.92
    """Share of a GPU's memory the estimate may use"""
    format: AdviseFormat = "table"
    """table or json"""
    gpu_specs: GpuSpecs = field(default_factory=dict)
    """Achievable rates per GPU model: +gpu_specs.NAME={hbm_gbps: ..., tflops: ..., memory_gib: ...}"""
    projection: Any = None
    """Collectives over an unmeasured path: efficiency and latency_us per path kind"""
    p2p: OnOff = "on"
    """on or off: off stages projected collectives through host memory (what_if=pcie)"""
    concurrency: IntsOrNone = None
    """Requests in flight (the decode step's batch); replaces batch= when given"""
    expected_error: ErrorBands = None
    """Per basis: the validation tables' error range of a predicted figure"""


COMMANDS = {
    "sweep": SweepConfig,
    "copy": CopyConfig,
    "tokens": TokensConfig,
    "accept": AcceptConfig,
    "advise": AdviseConfig,
}
