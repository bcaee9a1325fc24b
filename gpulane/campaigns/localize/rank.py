"""The localization job every rank runs (``gpulane sweep localize=pairs|halving|ring``).

One launch of all the node's ranks (one per GPU, by whatever launcher: local, mpirun,
Slurm); each subset the planner asks for is a torch.distributed subgroup of that world, so
a subset runs on exactly its GPUs (rank r keeps GPU r, as in the node-level sweep) without
a new launch per subset. Rank 0 holds the :class:`~gpulane.campaigns.localize.plan.Search`
and hands each batch to every rank; the subsets of a batch are measured one after the
other (side by side they would share the host bridge on PCIe machines, and the figures of
one batch would not be comparable), each with ``warmup`` + ``iters`` operations at the
largest size of ``sizes.max``. Each subset is one row (``extra.localize``), so the figures
stay in the run's rows; what the search named goes to ``localize.json``.

``slow_rank`` / ``slow_pair`` / ``slow_ms`` (debugging keys, hidden from help, like
``corrupt_rank``) plant a real slowdown: the rank sleeps ``slow_ms`` before each operation
of a subset that holds it (``slow_pair``: that holds both ranks of the pair), so tests on
CPUs (gloo) localize a slow "GPU" or "link" through real processes.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from gpulane import __version__
from gpulane.campaigns.localize.plan import Search, Subset
from gpulane.collectives.backends.torch_dist import TorchBackend
from gpulane.collectives.spec import collective, dtype
from gpulane.config.commands import SweepConfig
from gpulane.rank import RankContext
from gpulane.record import Row, RowWriter, shaping_env
from gpulane.topology.gpu_state import record_gpu_state
from gpulane.units import parse_size

LOCALIZE_FILE = "localize.json"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
CPU_SPAN_S = 0.05  # least time the timed operations of a subset take on CPUs
MAX_CPU_ITERS = 2000


def figure_op(cfg: SweepConfig) -> str:
    """The collective localized: the first of ``collectives`` that can be (all_reduce else)."""
    names = cfg.collectives if isinstance(cfg.collectives, (list, tuple)) else [cfg.collectives]
    names = [str(n) for n in names]
    return next((n for n in names if n in OPS), "all_reduce")


def gpu_names(n: int) -> list[str]:
    return [f"GPU{i}" for i in range(n)]


def planted_delay(cfg: SweepConfig, rank: int, members: list[int]) -> float:
    """Seconds this rank sleeps before each operation of the subset ``members``."""
    ms = float(getattr(cfg, "slow_ms", 0) or 0)
    slow_rank = getattr(cfg, "slow_rank", None)
    if slow_rank is not None and rank == int(slow_rank) and rank in members:
        return ms / 1e3
    pair = getattr(cfg, "slow_pair", None)
    if pair:
        a, b = (int(x) for x in list(pair)[:2])
        if rank == a and a in members and b in members:
            return ms / 1e3
    return 0.0


class _Measurer:
    def __init__(self, cfg: SweepConfig, ctx: RankContext, backend: TorchBackend) -> None:
        self.cfg, self.ctx, self.b = cfg, ctx, backend
        self.op = figure_op(cfg)
        self.spec = collective(self.op)
        self.dt = dtype(str(cfg.dtype if isinstance(cfg.dtype, str) else next(iter(cfg.dtype))))
        size = str(cfg.sizes.max)
        if size == "auto":
            size = "1G" if backend.on_device else "32M"
        self.size = parse_size(size, "sizes.max")
        self.warmup = max(int(cfg.warmup), 1)
        self.iters = max(int(cfg.iters), 1)
        self.groups: dict[tuple[int, ...], Any] = {}

    def measure(self, subset: list[int]) -> list[float] | None:
        """Seconds of each timed operation on this rank (None when it is not in
        ``subset``)."""
        dist, torch = self.b.dist, self.b.torch
        group = self.group(subset)
        if self.ctx.rank not in subset:
            return None
        k = len(subset)
        c = self.spec.plan(self.size, self.dt, k)
        tdt = getattr(torch, self.dt.torch_name)
        send = torch.ones(max(c.send, 1), dtype=tdt, device=self.b.device)
        recv = torch.empty(max(c.recv, 1), dtype=tdt, device=self.b.device)
        delay = planted_delay(self.cfg, self.ctx.rank, subset)

        def once() -> None:
            if delay:
                time.sleep(delay)
            if self.op == "all_reduce":
                dist.all_reduce(recv, group=group)
            elif self.op == "all_gather":
                dist.all_gather_into_tensor(recv, send[: recv.numel() // k], group=group)
            elif self.op == "reduce_scatter":
                dist.reduce_scatter_tensor(recv[: send.numel() // k], send, group=group)
            else:
                dist.all_to_all_single(recv, send, group=group)

        for _ in range(self.warmup):
            once()
        self.b.synchronize()
        times = self.b.time_loop(once, self.iters)
        if self.b.on_device:
            return times
        # Host clocks on a shared CPU: operations of microseconds back to back all fall in
        # one stretch the scheduler took away. Go on until the members have spent
        # CPU_SPAN_S (agreed over the group: every member runs the same operations).
        more = torch.zeros(1)
        while len(times) < MAX_CPU_ITERS:
            more[0] = 1.0 if sum(times) < CPU_SPAN_S else 0.0
            dist.all_reduce(more, op=dist.ReduceOp.MAX, group=group)
            if not more[0]:
                break
            times += self.b.time_loop(once, self.iters)
        return times

    def group(self, subset: list[int]) -> Any:
        """The subgroup of ``subset``, made once. Every rank of the world makes every
        group, in the same order: gloo subgroups made by their members alone
        (use_local_synchronization) hung beside a world collective of the others."""
        key = tuple(subset)
        if key not in self.groups:
            self.groups[key] = self.b.dist.new_group(ranks=list(subset))
        return self.groups[key]

    def figure(self, seconds: float, k: int) -> tuple[float, float, int]:
        """(figure, algbw, printed size): busbw; algbw for one GPU alone (busbw is 0)."""
        c = self.spec.plan(self.size, self.dt, k)
        printed = self.spec.printed_size(c, self.dt)
        alg, bus = self.spec.bandwidth(printed, seconds, k)
        return (bus if k > 1 else alg), alg, printed


def per_op_seconds(per_rank: list[list[float]], on_device: bool) -> float:
    """Each operation's time on its slowest rank, over the iterations: the median on GPUs
    (device events; a foreign process slows every operation), the minimum on CPUs (host
    clocks on a shared CPU only ever run late: the scheduler's delays add, never remove;
    a planted delay is in every operation, so the minimum keeps it)."""
    slowest = sorted(max(ts) for ts in zip(*per_rank, strict=False))
    return slowest[len(slowest) // 2] if on_device else slowest[0]


def run_rank(cfg: SweepConfig, ctx: RankContext) -> None:
    backend = TorchBackend(ctx, device=str(cfg.device), timeout_s=float(cfg.timeout_s))
    try:
        _localize(cfg, ctx, backend)
    finally:
        backend.close()


def patterns_of(value: Any) -> list[str]:
    """``localize=pairs`` or ``localize=[pairs,halving,ring]`` (each run in turn)."""
    if isinstance(value, str):
        return [v.strip() for v in value.strip("[]").split(",") if v.strip()]
    return [str(v) for v in value]


def unit_names(places: list[tuple[str, int]]) -> list[str]:
    """A name per rank: ``GPU<local rank>`` on one host, ``host:GPU<local rank>`` across
    hosts (node x GPU plans)."""
    if len({h for h, _ in places}) <= 1:
        return gpu_names(len(places))
    return [f"{h}:GPU{i}" for h, i in places]


def _localize(cfg: SweepConfig, ctx: RankContext, backend: TorchBackend) -> None:
    places = backend.control.broadcast(backend.control.gather((ctx.host, ctx.local_rank)))
    units = unit_names([(str(h), int(i)) for h, i in places])
    tolerance = float(getattr(cfg, "localize_tolerance", 0.8) or 0.8)
    m = _Measurer(cfg, ctx, backend)
    writer = RowWriter(ctx.run_dir) if ctx.is_leader else None
    base = {
        "versions": {"gpulane": __version__, **backend.versions()},
        "env": shaping_env(),
        "path": _path_label if backend.on_device else (lambda members: None),
    }
    results = []
    index = 0
    pids = backend.control.gather(os.getpid())
    if backend.on_device and pids is not None:  # what else runs on the GPUs, and their clocks
        record_gpu_state(ctx.run_dir, "before", set(pids))
    for pattern in patterns_of(cfg.localize):
        failed = bool(getattr(cfg, "localize_node_failed", False))
        search = Search(pattern, units, tolerance, failed) if ctx.is_leader else None
        while True:
            batch: list[Subset] = backend.control.broadcast(search.batch() if search else None)
            if not batch:
                break
            figures = []
            for subset in batch:
                members = [units.index(u) for u in subset]
                ctx.heartbeat(index, f"{pattern}: {m.op} on {'+'.join(subset)}", 60.0)
                index += 1
                gathered = backend.control.gather(m.measure(members))
                if writer is None or gathered is None:
                    continue
                seconds = per_op_seconds([t for t in gathered if t is not None], backend.on_device)
                figures.append(m.figure(seconds, len(members))[0])
                writer.write(_row(cfg, ctx, backend, m, base, pattern, subset, members, seconds))
            if search is not None:
                search.feed(figures)
        if search is not None:
            results.append(search.result().to_dict())
    ctx.heartbeat(index, "done")
    backend.control.barrier()
    if writer is not None:
        writer.close()
        (ctx.run_dir / LOCALIZE_FILE).write_text(
            json.dumps({"op": m.op, "size_bytes": m.size, "results": results}, indent=1)
        )


def _path_label(members: list[int]) -> str | None:
    """The worst path label among the subset's GPUs (as the node-level rows carry)."""
    try:
        from gpulane.topology.live import worst_path_for_gpus

        return worst_path_for_gpus(members)
    except Exception:
        return None


def _row(
    cfg: SweepConfig,
    ctx: RankContext,
    backend: TorchBackend,
    m: _Measurer,
    base: dict[str, Any],
    pattern: str,
    subset: list[str],
    members: list[int],
    seconds: float,
) -> Row:
    fig, alg, printed = m.figure(seconds, len(members))
    return Row(
        run_id=str(cfg.run_id),
        kind="localize",
        backend=backend.name,
        op=m.op,
        build=str(cfg.build),
        host=ctx.host,
        nodes=1,
        world_size=len(members),
        dtype=m.dt.name,
        redop="sum",
        root=-1,
        in_place=m.op == "all_reduce",
        size_bytes=printed,
        count=printed // m.dt.itemsize,
        iters=m.iters,
        time_us=seconds * 1e6,
        algbw_gbps=alg,
        busbw_gbps=fig if len(members) > 1 else None,
        # The label goes in extra, not in ``path``: rules select rows by path, and a
        # subset's figure is evidence for localization, not a figure of the machine.
        path=None,
        source="measured",
        env=base["env"],
        versions=base["versions"],
        extra={
            "localize": {
                "pattern": pattern,
                "subset": subset,
                "path": base["path"](members) if len(members) > 1 else None,
            },
            "launcher": ctx.info.launcher,
        },
        status="ok",
    )
