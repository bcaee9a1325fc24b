"""The reference table: known-good ranges of figures, each with where it comes from.

An entry names the machine it holds for (GPU model, path label, world size, nodes), the
figure (kind, op, metric, a band of sizes), the conditions that change the figure (NCCL
version, NVLS on or off, NCCL switches such as ``NCCL_P2P_DISABLE=1``), a range
(``low``..``high``; a threshold has only ``low``) and its provenance (``origin``,
``source``, ``cite``, ``conditions``, ``runs``).

Tables are YAML lists. gpulane ships ``gpulane/conf/reference/*.yaml``; a site adds its
own (``gpulane reference add``) in ``<results_dir>/reference.yaml`` or
``$XDG_CONFIG_HOME/gpulane/reference.yaml`` (``~/.config`` by default). See
docs/reference.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from gpulane.errors import InputError
from gpulane.units import format_size, parse_size

SITE_FILE = "reference.yaml"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ORIGINS = ("site", "measured", "published", "threshold")
METRIC_OF_KIND = {"collective": "busbw_gbps", "copy": "algbw_gbps", "tokens": "tokens_per_s"}
ANY_GPU = "*"  # an entry for every GPU model: a figure decided by the link alone
UNITS = {"busbw_gbps": "GB/s", "algbw_gbps": "GB/s", "tokens_per_s": "tok/s"}

# NCCL switches that do not change where the bytes go (logging, naming, the version a
# launcher exported). Every other NCCL_* setting is a condition of the figure.
NEUTRAL_ENV = frozenset(
    {
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_FILE",
        "NCCL_VERSION",
        "NCCL_SOCKET_IFNAME",
        "NCCL_HOSTID",
        "NCCL_TOPO_DUMP_FILE",
        "NCCL_NVLS_ENABLE",  # a key of its own (nvls)
    }
)


@dataclass(frozen=True)
class Entry:
    """One known-good range for one figure on one kind of machine."""

    gpu: tuple[str, ...]  # GPU model names as NVML prints them ("NVIDIA H200")
    path: str  # NV18, PIX, ..., SYS, NET; "*" for a figure of one GPU (host copies)
    world_size: int  # 0: any (a copy figure per GPU)
    op: str
    low: float
    source: str  # short provenance: "nccl-tests#212", "gpulane runs (2x H200)"
    cite: str  # a URL, or a file in the repository
    origin: str = "measured"  # site, measured, published, threshold
    high: float | None = None  # None: a threshold (at least low)
    kind: str = "collective"
    metric: str = "busbw_gbps"
    nodes: int = 1
    size_min: int = 0
    size_max: int = 1 << 62
    nccl: str | None = None  # version prefix ("2.28") or band ("2.23-2.27"); None: any
    nvls: bool | None = None  # None: either
    env: tuple[tuple[str, str], ...] = ()  # NCCL switches the figure was measured with
    memory: str | None = None  # copies: pinned, pageable, device
    graph: bool | None = None  # collectives launched through CUDA graphs; None: either
    link: str | None = None  # copies: the host link ("PCIe Gen5 x16"); None: any
    host_memory: str | None = None  # copies: NUMA-local or remote host memory; None: either
    p2p: bool | None = None  # GPU peer access on (True) or off (collectives, peer copies)
    bidirectional: bool | None = None  # copies both ways at once; None: one direction
    runs: int | None = None
    run_ids: tuple[str, ...] = ()  # the gpulane runs the range was made from (self-judging)
    conditions: str = ""
    quote: str = ""  # the source's own words for the figure, verbatim (" ... " between)
    local_copy: str = ""  # a verbatim copy of the source in this repository, to check quote
    where: str = ""  # the table file the entry was read from

    @property
    def unit(self) -> str:
        return UNITS.get(self.metric, "")

    def machine(self) -> str:
        """``4× H200 NV18 without NVLS``: the machine and conditions the range holds for."""
        model = short_model(self.gpu[0]) if self.gpu else "?"
        model = "any GPU" if model == ANY_GPU else model
        nodes = f"{self.nodes} nodes × " if self.nodes > 1 else ""
        if self.world_size == 0 and self.op == "p2p":
            pair = "a pair of GPUs" if model == "any GPU" else f"a pair of {model}"
            text = pair + (f" on {self.path}" if self.path != "*" else "")
            if self.p2p is not None:
                text += " P2P on" if self.p2p else " P2P off"
            return text + (", both directions" if self.bidirectional else "")
        if self.world_size == 0:
            # "any GPU on PCIe Gen5 x16", not "one any GPU on ...": the entry names no model
            text = "any GPU" if model == "any GPU" else f"one {model}"
            text += f" on {self.link}" if self.link else ""
            mem = " ".join(m for m in (self.memory, self.host_memory) if m)
            text += f" ({mem} memory)" if mem else ""
            text += ", both directions" if self.bidirectional else ""
            return text + (f", NCCL {self.nccl}" if self.nccl else "")
        path = "any path" if self.path == "*" else self.path
        text = f"{nodes}{self.world_size}× {model} {path}"
        if self.nvls is True:
            text += " with NVLS"
        elif self.nvls is False:
            text += " without NVLS"
        if self.env:
            text += " " + " ".join(f"{k}={v}" for k, v in self.env)
        if self.p2p is not None:
            text += " P2P on" if self.p2p else " P2P off"
        if self.graph:
            text += ", CUDA graphs"
        if self.nccl:
            text += f", NCCL {self.nccl}"
        return text

    def band(self) -> str:
        if self.size_min == self.size_max:
            return format_size(self.size_min)
        high = "" if self.size_max >= 1 << 62 else format_size(self.size_max)
        return f"{format_size(self.size_min)}–{high}" if high else f"≥ {format_size(self.size_min)}"

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in asdict(self).items():
            if k == "where":
                continue
            if k in ("gpu", "run_ids"):
                v = list(v)
            elif k == "env":
                v = dict(v)
            elif k in ("size_min", "size_max"):
                v = format_size(v).replace(" ", "").replace("iB", "") if v < 1 << 62 else None
            out[k] = v
        return {k: v for k, v in out.items() if v not in (None, {}, "", [])}


def short_model(name: str) -> str:
    """``NVIDIA H200`` -> ``H200``; ``NVIDIA H100 80GB HBM3`` -> ``H100 80GB HBM3``."""
    text = str(name).strip()
    return text[len("NVIDIA ") :] if text.upper().startswith("NVIDIA ") else text


def model_key(name: str) -> str:
    return short_model(name).casefold()


def _entry(raw: Mapping[str, Any], where: str, index: int) -> Entry:
    what = f"reference table {where}, entry {index + 1}"
    if not isinstance(raw, Mapping):
        raise InputError(f"{what}: expected a mapping, got {type(raw).__name__}")
    missing = [
        k for k in ("gpu", "path", "world_size", "op", "low", "source", "cite") if k not in raw
    ]
    if missing:
        raise InputError(f"{what}: missing {', '.join(missing)}")
    known = set(Entry.__dataclass_fields__) - {"where"}
    unknown = sorted(set(raw) - known - {"size"})
    if unknown:
        raise InputError(f"{what}: unknown key {unknown[0]} (known: {', '.join(sorted(known))})")
    data = dict(raw)
    gpus = data["gpu"] if isinstance(data["gpu"], list) else [data["gpu"]]
    data["gpu"] = tuple(str(g) for g in gpus)
    if data.get("run_ids") is not None:
        ids = data["run_ids"] if isinstance(data["run_ids"], list) else [data["run_ids"]]
        data["run_ids"] = tuple(str(r) for r in ids)
    if "size" in data:  # one size: size_min = size_max
        data["size_min"] = data["size_max"] = data.pop("size")
    for key in ("size_min", "size_max"):
        if data.get(key) is not None:
            data[key] = parse_size(data[key], f"{what}: {key}")
        else:
            data.pop(key, None)
    data["env"] = tuple(sorted((str(k), str(v)) for k, v in dict(data.get("env") or {}).items()))
    if data.get("nccl") is not None:
        data["nccl"] = str(data["nccl"])
    origin = str(data.get("origin", "measured"))
    if origin not in ORIGINS:
        raise InputError(f"{what}: origin {origin!r}: choose one of {', '.join(ORIGINS)}")
    try:
        entry = Entry(**data, where=where)
        low, high = float(entry.low), None if entry.high is None else float(entry.high)
    except (TypeError, ValueError) as err:
        raise InputError(f"{what}: {err}") from err
    if high is not None and high < low:
        raise InputError(f"{what}: high {high} is below low {low}")
    return entry


def read_table(path: Path) -> list[Entry]:
    """The entries of one YAML table file."""
    try:
        # the C loader where PyYAML has it: the shipped tables are a few thousand lines,
        # read on every `results`, and the pure-Python loader spends about a second on them
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except OSError as err:
        raise InputError(f"reference table {path}: cannot read: {err.strerror or err}") from err
    except yaml.YAMLError as err:
        raise InputError(f"reference table {path}: not YAML ({err})") from err
    if data is None:
        return []
    if not isinstance(data, list):
        raise InputError(f"reference table {path}: expected a list of entries")
    return [_entry(raw, str(path), i) for i, raw in enumerate(data)]


def shipped_tables() -> list[Path]:
    folder = files("gpulane") / "conf" / "reference"
    return sorted(Path(str(p)) for p in folder.iterdir() if str(p).endswith(".yaml"))


def site_tables(results_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The site's own tables that exist: beside the runs first, then the user's config."""
    out = []
    if results_dir is not None:
        out.append(Path(results_dir) / SITE_FILE)
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    out.append(config / "gpulane" / SITE_FILE)
    return [p for p in out if p.is_file()]


@dataclass
class ReferenceTable:
    entries: list[Entry] = field(default_factory=list)
    _index: dict[tuple[str, str, str], list[Entry]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # what the judge found for a figure's facts: figures of one machine share it
    memo: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def for_figure(self, metric: str, kind: str, op: str) -> list[Entry]:
        """The entries for one metric, kind and op, in table order: the table is indexed
        once, so judging a figure looks at its own few entries, not the whole table."""
        if self._index is None or sum(map(len, self._index.values())) != len(self.entries):
            index: dict[tuple[str, str, str], list[Entry]] = {}
            for e in self.entries:
                index.setdefault((e.metric, e.kind, e.op), []).append(e)
            self._index = index
            self.memo.clear()
        return self._index.get((metric, kind, op), [])

    @classmethod
    def load(
        cls,
        results_dir: str | os.PathLike[str] | None = None,
        extra: Iterable[Path] = (),
        shipped: bool = True,
    ) -> ReferenceTable:
        paths = [*extra, *site_tables(results_dir), *(shipped_tables() if shipped else [])]
        entries: list[Entry] = []
        for p in paths:
            entries.extend(read_table(p))
        return cls(entries)
