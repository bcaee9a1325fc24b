"""Where a run's NCCL INFO lines are, and what they say for its rows.

gpulane asks NCCL for its init lines in ``<run_dir>/nccl/`` (rundir.nccl_capture_env). A
user who set NCCL_DEBUG themselves keeps their own logging; then the lines are read from
their NCCL_DEBUG_FILE, else from the ranks' own logs (``<run_dir>/logs/rank-N.log``, where
the local launcher puts what each rank prints). :class:`NcclLogs` re-reads the files only
when they grew, so a rank job may ask for every row.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpulane.errors import ParseError
from gpulane.rundir import LOG_DIR, NCCL_LOG_DIR
from gpulane.textio import read_text
from gpulane.topology.nccl_info import Communicator, NcclInfo, parse_nccl_texts, sort_labels

MAX_PAIRS = 256  # an extra.nccl stays small however many GPUs a run has
SLACK_S = 5.0  # a user's own NCCL_DEBUG_FILE of an earlier run is older than this run


def log_files(
    run_dir: Path, env: Mapping[str, str] | None = None, since: float | None = None
) -> tuple[list[Path], str]:
    """The files that hold this run's NCCL lines, and where they were looked for."""
    env = os.environ if env is None else env
    ours = run_dir / NCCL_LOG_DIR
    files = sorted(ours.glob("*.log")) if ours.is_dir() else []
    if files:
        return files, str(ours)
    pattern = env.get("NCCL_DEBUG_FILE")
    if pattern:
        wanted = pattern.replace("%%", "\0").replace("%h", "*").replace("%p", "*")
        found = [Path(p) for p in sorted(glob.glob(wanted.replace("\0", "%")))]
        if since is not None:
            found = [p for p in found if _mtime(p) >= since - SLACK_S]
        return found, pattern
    logs = run_dir / LOG_DIR
    return (sorted(logs.glob("rank-*.log")) if logs.is_dir() else []), str(logs)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def read_nccl_files(files: list[Path]) -> NcclInfo:
    """One :class:`NcclInfo` of several files; unreadable or empty ones are passed over."""
    texts = []
    for path in files:
        try:
            texts.append(read_text(path))
        except ParseError:
            continue
    return parse_nccl_texts(texts)


class NcclLogs:
    """A run's NCCL lines, read again only when the files changed."""

    def __init__(
        self, run_dir: Path, env: Mapping[str, str] | None = None, since: float | None = None
    ) -> None:
        self.run_dir = Path(run_dir)
        self.env = dict(os.environ if env is None else env)
        self.since = time.time() if since is None else since
        self._stamp: tuple[tuple[str, int], ...] | None = None
        self.info: NcclInfo | None = None
        self.where = ""
        self._said: str | None = None

    def read(self) -> NcclInfo | None:
        """What the files say now; None while they hold no NCCL line."""
        files, self.where = log_files(self.run_dir, self.env, self.since)
        stamp = tuple((str(p), _size(p)) for p in files)
        if stamp != self._stamp:
            self._stamp = stamp
            info = read_nccl_files(files)
            self.info = None if info.empty() else info
        return self.info

    def summary(self) -> dict[str, Any] | None:
        info = self.read()
        return summary(info, self.where) if info is not None else None

    def for_row(self, path: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
        """(``extra.nccl`` for the next row, a ``# transport: ...`` line for the user when
        the transport is new or changed since the last call, else None)."""
        found = self.summary()
        if found is None:
            return None, None
        words = describe(found, path)
        if words is None or words == self._said:
            return found, None
        self._said = words
        return found, f"# transport: {words}"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _pairs(info: NcclInfo) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """GPU pairs on one host (P2P, SHM) and each GPU's network connections."""
    pairs: dict[tuple[str | None, str, str], dict[str, Any]] = {}
    net: dict[tuple[str | None, str, str], dict[str, Any]] = {}
    # On one host a network connection is a pair too (NCCL_P2P_DISABLE + NCCL_SHM_DISABLE).
    one_host = (
        len({link.host for link in info.links}) <= 1
        and all(_one_node(c) for c in info.communicators)
        and not _gpu_shared_by_ranks(info)
    )
    for link in info.links:
        if link.kind in ("NET", "CollNet") and not one_host:
            # A [send] line is logged by the sender, a [receive] line by the receiver.
            local = link.dst_gpu if link.direction == "receive" else link.src_gpu
            gpu = local or f"rank{link.dst if link.direction == 'receive' else link.src}"
            key = (link.host, gpu, link.label)
            entry = net.setdefault(
                key, {"host": link.host, "gpu": gpu, "transport": link.label, "channels": set()}
            )
            entry["channels"].add(link.channel)
            continue
        a = link.src_gpu or f"rank{link.src}"
        b = link.dst_gpu or f"rank{link.dst}"
        a, b = sorted((a, b), key=gpu_order)
        pkey = (link.host, a, b)
        entry = pairs.setdefault(
            pkey,
            {
                "host": link.host,
                "a": a,
                "b": b,
                "transports": set(),
                "via": set(),
                "channels": set(),
            },
        )
        entry["transports"].add(link.label)
        entry["via"].add(link.via)
        entry["channels"].add(link.channel)
    out_pairs = [
        {
            "host": e["host"],
            "a": e["a"],
            "b": e["b"],
            "transport": "+".join(sort_labels(e["transports"])),
            "via": sorted(e["via"]),
            "channels": len(e["channels"]),
        }
        for e in pairs.values()
    ][:MAX_PAIRS]
    out_net = [
        {
            "host": e["host"],
            "gpu": e["gpu"],
            "transport": e["transport"],
            "channels": len(e["channels"]),
        }
        for e in net.values()
    ][:MAX_PAIRS]
    return out_pairs, out_net


def _one_node(comm: Communicator) -> bool:
    """NCCL counts one node, or one per rank: with P2P and SHM both off (NCCL 2.28.9 on one
    host: ``nRanks 2 nNodes 2 localRanks 1``) no rank can reach another but by the network,
    so NCCL makes each its own node, though they share the host."""
    return comm.nnodes in (None, 1) or (comm.local_ranks == 1 and comm.nnodes == comm.nranks)


def _gpu_shared_by_ranks(info: NcclInfo) -> bool:
    """Two ranks on one GPU: the lines come from several hosts that share a name (a log
    whose host names were replaced), so "one host" cannot be told from them."""
    owner: dict[str, int] = {}
    for link in info.links:
        for rank, gpu in ((link.src, link.src_gpu), (link.dst, link.dst_gpu)):
            if gpu is not None and owner.setdefault(gpu, rank) != rank:
                return True
    return False


def gpu_order(name: str) -> tuple[int, str]:
    """GPU2 before GPU10; other names (bus ids, rank3) after the GPUs, by name."""
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits[:6]) if digits and name.startswith("GPU") else 1 << 30, name)


def summary(info: NcclInfo, source: str = "") -> dict[str, Any]:
    """What a row keeps of NCCL's account (``extra.nccl``): small, JSON-ready."""
    pairs, net = _pairs(info)
    world = max(info.communicators, key=lambda c: c.nranks or 0, default=None)
    channels = {
        k: max(c.channels[k] for c in info.communicators if k in c.channels)
        for k in ("coll", "collnet", "nvls", "p2p", "p2p_per_peer")
        if any(k in c.channels for c in info.communicators)
    }
    out: dict[str, Any] = {
        "transport": info.label(),
        "version": info.version,
        "cuda": info.cuda,
        "channels": channels.get("coll"),
        "channel_counts": channels or None,
        "nvls": any(c.channels.get("nvls", 0) > 0 for c in info.communicators),
        "collnet": any(c.collnet for c in info.communicators),
        "pairs": pairs,
        "net": net,
        "network": info.networks[0] if info.networks else None,
        "net_devices": info.net_devices or None,
        "gdr": info.ring_gdr,
        "gdr_disabled": [g for g in info.gdr if not g["enabled"]][:8] or None,
        "no_device": info.no_device or None,
        "communicators": len(info.communicators),
        "source": source or None,
    }
    if world is not None:
        out["rings"] = {str(k): v for k, v in sorted(world.rings.items())[:8]} or None
        out["graphs"] = world.patterns[:4] or None
        out["trees"] = list(world.trees.values())[:2] or None
    if info.nvls_support:
        out["nvls_support"] = sorted({v for v in info.nvls_support.values()})
    if info.p2p_disabled:
        out["p2p_disabled"] = [list(p) for p in info.p2p_disabled]
    if info.env:
        out["nccl_env"] = info.env
    if info.warnings:
        out["warnings"] = info.warnings[:3]
    if info.damaged:
        out["damaged_lines"] = info.damaged
    return out


def describe(extra_nccl: Mapping[str, Any], path: str | None = None) -> str | None:
    """``P2P/CUMEM, 2 channels (NV18)``: the sweep header's words; None when unknown."""
    transport = extra_nccl.get("transport")
    if not transport:
        return None
    text = str(transport)
    channels = extra_nccl.get("channels")
    if channels:
        text += f", {channels} channel{'s' if channels != 1 else ''}"
    if path:
        text += f" ({path})"
    return text
