"""The copy job (one rank on this host, every GPU): host<->device and GPU<->GPU copy
bandwidth, each point beside what its path can carry.

Order of work: for each GPU (host buffers placed on its NUMA node), every host memory kind
and size: h2d, d2h and both at once; then every GPU to and from the host at once; then
every ordered GPU pair with peer access off and on, unidirectional and bidirectional, and
the latency matrix. Rows are written as they are measured; a failing section becomes an
error row and the run goes on with the next one (the session then exits 1).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

from gpulane.config.commands import CopyConfig
from gpulane.errors import MissingComponent
from gpulane.rank import RankContext, hostname
from gpulane.record import Row, RowWriter
from gpulane.rundir import RunDir, run_env
from gpulane.topology.bandwidth import LineRate
from gpulane.topology.gpu_state import foreign_on_gpus, record_gpu_state
from gpulane.topology.model import Topology
from gpulane.topology.paths import path_label
from gpulane.transfers.efficiency import Expected
from gpulane.transfers.options import Options, read_options
from gpulane.transfers.points import BACKEND, Point, aggregate_row, to_row
from gpulane.transfers.sizes import parse_gpus


class Recorder:
    """Turns points into rows, writes them at once, and keeps them for the tables."""

    def __init__(self, run: RunDir, env: dict[str, str], versions: dict[str, str], world: int):
        self.run = run
        self.env = env
        self.versions = versions
        self.world = world
        self.writer = RowWriter(run.path)
        self.rows: list[Row] = []
        self.failures: list[str] = []
        self.note: Callable[[str], None] = lambda text: None  # a line for the user
        # GPU -> the other processes on it before the copies ({} none; None: not read),
        # on every row, as a sweep's rows carry it (the no_foreign rule reads it)
        self.foreign: dict[str, str] | None = None

    def point(self, p: Point, link: LineRate | None, path: str | None = None) -> Row:
        # world_size: the GPUs taking part in this point (1 host copy, 2 peer, n all at once)
        world = int(p.extra.get("concurrent") or (2 if p.op == "p2p" else 1))
        row = to_row(
            p, run_id=self.run.run_id, build=self.run.build, link=link, path=path,
            world_size=world, host=hostname(), env=self.env, versions=self.versions,
        )  # fmt: skip
        if self.foreign is not None:
            row.extra["foreign"] = self.foreign
        self.add(row)
        return row

    def add(self, row: Row) -> None:
        self.writer.write(row)
        self.rows.append(row)

    def error(self, op: str, where: str, err: BaseException) -> None:
        message = f"{where}: {err}" if str(err) else f"{where}: {type(err).__name__}"
        self.failures.append(message)
        self.add(
            Row.copy(
                run_id=self.run.run_id, backend=BACKEND, op=op,
                build=self.run.build, host=hostname(), world_size=self.world,
                env=self.env, versions=self.versions, status="error", error=message,
                extra={"at": where},
            )
        )  # fmt: skip


def _section(rec: Recorder, op: str, where: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except MissingComponent as err:
        rec.note(f"# {where}: skipped: {err}")
    except Exception as err:  # the section's own words go into its error row
        rec.error(op, where, err)


def run_rank(cfg: CopyConfig, ctx: RankContext) -> None:
    """The whole copy run, on one rank that drives every GPU of this host."""
    opts = read_options(cfg)
    from gpulane.transfers import gpuinfo, numa
    from gpulane.transfers.measure import Copier, load_torch

    torch = load_torch()
    gpus = parse_gpus(cfg.gpus, int(torch.cuda.device_count()))
    max_size = max([*opts.sizes, opts.latency_size])
    copier = Copier(
        gpus, max_size, samples=opts.samples, warmup=opts.warmup,
        min_sample_bytes=opts.min_sample_bytes, max_reps=opts.max_reps, check=opts.check,
        use_cupy=opts.engine != "torch",
    )  # fmt: skip
    if opts.engine == "cupy" and copier.rt is None:
        raise MissingComponent("engine=cupy but CuPy cannot be imported; use engine=auto")
    topo, topo_json = gpuinfo.probe_topology()
    infos = gpuinfo.describe_gpus(gpus, torch, copier.rt, topo)
    names = {g.index: g.name for g in infos}
    expected = Expected.from_topology(topo, list(names.values()))
    nodes = numa.online_nodes()
    placement = {g.index: numa.choose_node(opts.numa, g.numa, nodes) for g in infos}
    run = RunDir(str(cfg.run_id), ctx.run_dir, str(cfg.build))
    if topo_json:
        (run.path / "topology.json").write_text(json.dumps(topo_json, indent=1))
    rec = Recorder(run, run_env(cfg), gpuinfo.versions(torch, copier.rt), len(gpus))
    record_gpu_state(run.path, "before", {os.getpid()})
    found = foreign_on_gpus(run.path)
    rec.foreign = (
        None if found is None else {g: w for g, w in found.items() if g in set(names.values())}
    )
    engine = "CuPy cudaMemcpyAsync" if copier.rt is not None else "torch copy_"
    described = ", ".join(f"{g.name} {g.model or ''}".strip() for g in infos)
    ctx.note(f"# {len(gpus)} GPU(s): {described}; {engine}, {len(opts.sizes)} sizes")
    rec.note = ctx.note
    try:
        pinned = _host_sections(rec, copier, infos, opts, expected, placement)
        if opts.all_gpus and len(gpus) > 1 and len(pinned) == len(gpus):
            _section(
                rec,
                "h2d",
                "all GPUs at once",
                lambda: _all_gpus(rec, copier, infos, pinned, opts, expected),
            )
        for hb in pinned.values():
            hb.free()
        pinned.clear()
        if opts.peer and len(gpus) > 1:
            _peer_sections(rec, copier, infos, opts, expected, topo)
    finally:
        rec.writer.close()
        copier.close()
    if opts.plot:
        try:
            from gpulane.transfers.plot import PLOT_FILE, plot_bandwidth

            if plot_bandwidth(rec.rows, run.path / PLOT_FILE):
                ctx.note(f"# plot: {run.path / PLOT_FILE}")
        except Exception as err:  # a plot is never worth a failed run
            ctx.note(f"# plot skipped: {err}")


def _host_sections(
    rec: Recorder, copier: Any, infos: list[Any], opts: Options, expected: Expected,
    placement: dict[int, int | None],
) -> dict[int, Any]:  # fmt: skip
    """Per GPU: every host memory kind and size. Returns the pinned buffers kept for later."""
    from gpulane.transfers import gpuinfo, numa

    keep: dict[int, Any] = {}
    for g in infos:
        node = placement[g.index]
        busy_read = False

        def measure_kind(kind: str, g: Any = g, node: int | None = node) -> None:
            nonlocal busy_read
            with numa.on_node(node):
                hb = copier.host(kind, node)
                try:
                    if kind != "pageable" and not busy_read:
                        with copier.in_flight(g.index, hb):
                            busy = gpuinfo.busy_pcie_link(g.bus_id)
                        gpuinfo.merge_busy(expected, g.name, busy)
                        busy_read = True
                    link = expected.host_link(g.name)
                    for size in opts.sizes:
                        for p in copier.host_points(g.index, g.name, hb, size, opts.directions):
                            p.extra.update(
                                gpu_numa=g.numa, host_numa=node, gpu_model=g.model, **g.extra
                            )
                            rec.point(p, link)
                finally:
                    if kind == "pinned" and opts.all_gpus:
                        keep[g.index] = hb
                    else:
                        hb.free()

        for kind in opts.memory:
            _section(rec, "h2d", f"{g.name} {kind}", functools.partial(measure_kind, kind))
    return keep


def _all_gpus(
    rec: Recorder, copier: Any, infos: list[Any], pinned: dict[int, Any], opts: Options,
    expected: Expected,
) -> None:  # fmt: skip
    size = max(opts.sizes)
    names = {g.index: g.name for g in infos}
    total = expected.all_host([g.name for g in infos])
    for op in ("h2d", "d2h"):
        if op not in opts.directions:
            continue
        rows = [
            rec.point(p, expected.host_link(p.dst if op == "h2d" else p.src))
            for p in copier.all_host_points(names, pinned, size, op)
        ]
        rec.add(aggregate_row(rows, total, "all-gpus"))


def _peer_sections(
    rec: Recorder, copier: Any, infos: list[Any], opts: Options, expected: Expected,
    topo: Topology | None,
) -> None:  # fmt: skip
    from gpulane.transfers import gpuinfo

    gpuinfo.fill_pairs(expected, infos)
    names = {g.index: g.name for g in infos}
    by_index = {g.index: g for g in infos}

    def record(points: list[Point], peer: bool) -> None:
        for p in points:
            link = expected.pair_link(p.src, p.dst, peer)
            p.extra.update(cuda_src=_idx(by_index, p.src), cuda_dst=_idx(by_index, p.dst))
            rec.point(p, link, path_label(topo, [p.src, p.dst]))

    for peer in opts.peer_access:
        label = "peer access on" if peer else "peer access off"

        def run_peer(peer: bool = peer) -> None:
            if not peer and not copier.peer_off_available():
                raise MissingComponent("peer access off needs CuPy (cudaDeviceDisablePeerAccess)")
            copier.set_peer_access(peer)
            for a in copier.gpus:
                for b in copier.gpus:
                    if a == b:
                        continue
                    if peer and not copier.can_access_peer(a, b):
                        rec.note(f"# {names[a]} cannot access {names[b]} as a peer; skipped")
                        continue
                    for size in opts.sizes:
                        record(copier.peer_points(a, b, names, size, peer, False), peer)
                    if opts.latency:
                        record(
                            copier.peer_points(
                                a, b, names, opts.latency_size, peer, False, "latency"
                            ),
                            peer,
                        )
                    if opts.peer_bidirectional and a < b:
                        for size in opts.sizes:
                            record(copier.peer_points(a, b, names, size, peer, True), peer)

        _section(rec, "p2p", label, run_peer)


def _idx(by_index: dict[int, Any], name: str) -> int | None:
    for i, g in by_index.items():
        if g.name == name:
            return int(i)
    return None
