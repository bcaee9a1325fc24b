"""`gpulane copy`: host<->device and GPU<->GPU copy bandwidth on every GPU of this host.

Order of work: for each GPU (host buffers placed on its NUMA node), every host memory kind
and size: h2d, d2h and both at once; then every GPU to and from the host at once; then
every ordered GPU pair with peer access off and on, unidirectional and bidirectional, and
the latency matrix. Rows are written as they are measured; a failing section becomes an
error row and the run goes on with the next one (exit status 1).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gpulane.errors import InputError, MissingComponent, RunFailed
from gpulane.hydra_app import run_hydra
from gpulane.launch.env import hostname
from gpulane.record import Row, RowWriter
from gpulane.runs import (
    RunDir,
    Terminated,
    make_run_dir,
    run_env,
    save_config,
    sigterm_as_exception,
)
from gpulane.topology.bandwidth import LineRate
from gpulane.topology.model import Topology
from gpulane.topology.paths import path_label
from gpulane.transfers.efficiency import Expected
from gpulane.transfers.matrices import aggregate_table, host_table, p2p_matrices
from gpulane.transfers.points import BACKEND, Point, aggregate_row, to_row
from gpulane.transfers.sizes import check_size, copy_sizes, parse_gpus, parse_size_value

DIRECTIONS = ("h2d", "d2h", "bidir")
MEMORY_KINDS = ("pageable", "pinned", "pinned-wc")


def main(argv: list[str]) -> int:
    return run_hydra("copy", copy, argv, "gpulane copy")


def _as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _choices(value: Any, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [str(v).strip().lower() for v in _as_list(value, what)]
    if items == ["all"]:
        return list(allowed)
    for item in items:
        if item not in allowed:
            raise InputError(f"{what}: {item!r} is not one of {', '.join(allowed)}")
    return [a for a in allowed if a in items]


def _bools(value: Any, what: str) -> list[bool]:
    out: list[bool] = []
    for item in _as_list(value, what):
        text = str(item).strip().lower()
        if text in ("true", "on", "1", "yes", "enabled"):
            flag = True
        elif text in ("false", "off", "0", "no", "disabled"):
            flag = False
        elif text == "both":
            return [False, True]
        else:
            raise InputError(f"{what}: expected true/false (on/off), got {item!r}")
        if flag not in out:
            out.append(flag)
    return sorted(out)


@dataclass
class Options:
    sizes: list[int]
    directions: list[str]
    memory: list[str]
    numa: Any
    all_gpus: bool
    peer: bool
    peer_access: list[bool]
    peer_bidirectional: bool
    latency: bool
    latency_size: int
    samples: int
    warmup: int
    min_sample_bytes: int
    max_reps: int
    check: bool
    engine: str
    plot: bool


def _positive_int(value: Any, what: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{what}: expected a whole number >= {minimum}, got {value!r}")
    return value


def read_options(cfg: Any) -> Options:
    """Every setting checked before a GPU is touched (InputError names the key)."""
    sizes = copy_sizes(cfg.sizes.min, cfg.sizes.max, cfg.sizes.get("factor"), cfg.sizes.get("step"))
    engine = str(cfg.get("engine", "auto")).lower()
    if engine not in ("auto", "cupy", "torch"):
        raise InputError(f"engine: expected auto, cupy or torch, got {engine!r}")
    return Options(
        sizes=sizes,
        directions=_choices(cfg.directions, DIRECTIONS, "directions"),
        memory=_choices(cfg.memory, MEMORY_KINDS, "memory"),
        numa=cfg.get("numa", "local"),
        all_gpus=bool(cfg.all_gpus),
        peer=bool(cfg.peer),
        peer_access=_bools(cfg.peer_access, "peer_access"),
        peer_bidirectional=bool(cfg.peer_bidirectional),
        latency=bool(cfg.latency),
        latency_size=check_size(parse_size_value(cfg.latency_size, "latency_size"), "latency_size"),
        samples=_positive_int(cfg.samples, "samples"),
        warmup=_positive_int(cfg.warmup, "warmup", 0),
        min_sample_bytes=parse_size_value(cfg.min_sample_bytes, "min_sample_bytes"),
        max_reps=_positive_int(cfg.max_reps, "max_reps"),
        check=bool(cfg.check),
        engine=engine,
        plot=bool(cfg.plot),
    )


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

    def point(self, p: Point, link: LineRate | None, path: str | None = None) -> Row:
        # world_size: the GPUs taking part in this point (1 host copy, 2 peer, n all at once)
        world = int(p.extra.get("concurrent") or (2 if p.op == "p2p" else 1))
        row = to_row(
            p, run_id=self.run.run_id, build=self.run.build, link=link, path=path,
            world_size=world, host=hostname(), env=self.env, versions=self.versions,
        )  # fmt: skip
        self.add(row)
        return row

    def add(self, row: Row) -> None:
        self.writer.write(row)
        self.rows.append(row)

    def error(self, op: str, where: str, err: BaseException) -> None:
        message = f"{where}: {err}" if str(err) else f"{where}: {type(err).__name__}"
        self.failures.append(message)
        sys.stderr.write(f"gpulane: error: {message}\n")
        self.add(
            Row(
                run_id=self.run.run_id, kind="copy", backend=BACKEND, op=op,
                build=self.run.build, host=hostname(), world_size=self.world,
                env=self.env, versions=self.versions, status="error", error=message,
                extra={"at": where},
            )
        )  # fmt: skip

    def dicts(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.rows]


def _section(rec: Recorder, op: str, where: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except (KeyboardInterrupt, Terminated):
        raise
    except MissingComponent as err:
        print(f"# {where}: skipped: {err}", flush=True)
    except Exception as err:
        rec.error(op, where, err)


def copy(cfg: DictConfig) -> int:
    opts = read_options(cfg)
    from gpulane.transfers import gpuinfo, numa
    from gpulane.transfers.measure import Copier, load_torch

    torch = load_torch()
    gpus = parse_gpus(cfg.get("gpus", "all"), int(torch.cuda.device_count()))
    env = run_env(cfg)
    os.environ.update(env)
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
    run = make_run_dir(cfg)
    save_config(cfg, run, world_size=len(gpus), gpus=[g.name for g in infos], nodes=1)
    if topo_json:
        (run.path / "topology.json").write_text(json.dumps(topo_json, indent=1))
    rec = Recorder(run, env, gpuinfo.versions(torch, copier.rt), len(gpus))
    engine = "CuPy cudaMemcpyAsync" if copier.rt is not None else "torch copy_"
    described = ", ".join(f"{g.name} {g.model or ''}".strip() for g in infos)
    print(
        f"# gpulane copy: {len(gpus)} GPU(s) ({described}), {engine}, "
        f"{len(opts.sizes)} sizes, build {run.build}, run {run.run_id}",
        flush=True,
    )
    status = 0
    with sigterm_as_exception():
        try:
            pinned = _host_sections(rec, copier, infos, opts, expected, placement)
            if opts.all_gpus and len(gpus) > 1 and len(pinned) == len(gpus):
                _section(
                    rec,
                    "h2d",
                    "all GPUs at once",
                    lambda: _all_gpus(rec, copier, infos, pinned, opts, expected),
                )
                print(aggregate_table(rec.dicts()), flush=True)
            for hb in pinned.values():
                hb.free()
            pinned.clear()
            if opts.peer and len(gpus) > 1:
                _peer_sections(rec, copier, infos, opts, expected, topo)
                print(p2p_matrices(rec.dicts()), flush=True)
        except (KeyboardInterrupt, Terminated) as ex:
            code = 143 if isinstance(ex, Terminated) else 130
            rec.error("run", "interrupted" if code == 130 else "terminated (SIGTERM)", ex)
            status = code
        finally:
            rec.writer.close()
            run.finish()
            copier.close()
    if opts.plot and status == 0:
        try:
            from gpulane.transfers.plot import PLOT_FILE, plot_bandwidth

            if plot_bandwidth(rec.dicts(), run.path / PLOT_FILE):
                print(f"# plot: {run.path / PLOT_FILE}")
        except Exception as err:  # a plot is never worth a failed run
            print(f"# plot skipped: {err}")
    print(f"# rows: {run.rows_path} (and rows.parquet)", flush=True)
    if status:
        return status
    wrong = [r for r in rec.rows if r.wrong]
    if wrong:
        where = ", ".join(f"{r.op} {r.src}->{r.dst} {r.memory} {r.size_bytes} B" for r in wrong[:5])
        sys.stderr.write(f"gpulane: error: data differs after the copy at {where}\n")
    if rec.failures or wrong:
        return RunFailed.exit_code
    return 0


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
                            p.extra.update(gpu_numa=g.numa, gpu_model=g.model, **g.extra)
                            rec.point(p, link)
                finally:
                    if kind == "pinned" and opts.all_gpus:
                        keep[g.index] = hb
                    else:
                        hb.free()

        for kind in opts.memory:
            _section(rec, "h2d", f"{g.name} {kind}", functools.partial(measure_kind, kind))
        print(host_table(rec.dicts(), g.name), flush=True)
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
                        print(f"# {names[a]} cannot access {names[b]} as a peer; skipped")
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
