"""The per-rank sweep job: the same code under the local launcher, torchrun, srun or mpirun."""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable
from typing import Any

from gpulane import __version__
from gpulane.collectives.backends.base import Backend
from gpulane.collectives.harness import measure, summarize
from gpulane.collectives.plan import SweepPlan, point_label
from gpulane.collectives.ranging import range_sweep, wants_ranging
from gpulane.collectives.spec import Point
from gpulane.config.capabilities import backend_of
from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError
from gpulane.preflight import check_world, rank_facts
from gpulane.rank import RankContext
from gpulane.record import Row, own_rows_writer, shaping_env
from gpulane.topology.gpu_state import foreign_on_gpus, own_pids_of, record_gpu_state
from gpulane.topology.nccl_logs import NcclLogs

# backend config name -> class implementing gpulane.collectives.backends.base.Backend
BACKENDS = {
    "torch": "gpulane.collectives.backends.torch_dist:TorchBackend",
    "nccl": "gpulane.collectives.backends.nccl:NcclBackend",
    "mpi": "gpulane.collectives.backends.mpi:MpiBackend",
}

# skip_rank leaves out a collective at this point (counted from 1), so that finished rows
# are on disk when the run hangs.
SKIP_AT_POINT = 3


def backend_class(name: str) -> type[Backend] | None:
    """The class of backend ``name`` (its tables are read without starting it); None for
    a backend that runs no ranks of its own (nccl_tests)."""
    if name not in BACKENDS:
        return None
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_backend(cfg: SweepConfig, ctx: RankContext) -> Backend:
    name = str(cfg.backend.name)
    backend_cls = backend_class(name)
    if backend_cls is None:
        raise InputError(
            f"backend: {name!r} runs no ranks of its own here; use one of {list(BACKENDS)}"
        )
    return backend_cls(ctx, device=str(cfg.device), timeout_s=float(cfg.timeout_s))  # type: ignore[call-arg]


def preflight(backend: Backend, cfg: SweepConfig, points: list[Point]) -> None:
    """Try each (collective, dtype, redop) once on a tiny buffer, before measuring anything.

    A backend that cannot do one (gloo and int avg, say) stops the run with one line
    saying which and what to choose instead, on every rank alike.
    """
    seen: set[tuple[str, str, str]] = set()
    problems: list[str] = []
    for p in points:
        key = (p.op, p.dtype, p.redop)
        if key in seen:
            continue
        seen.add(key)
        places = [ip for ip in (True, False) if backend.supports(p, ip) is None]
        if not places:
            problems.append(f"{p.op}: {backend.supports(p, True)}")
            continue
        from gpulane.collectives.spec import plan_point

        tiny = plan_point(
            p.op, 64 * p.nranks * p.dt.itemsize, p.dtype, p.redop, max(p.root, 0), p.nranks
        )
        try:
            bufs = backend.allocate(tiny, places[0])
            backend.launch(tiny, bufs)
            backend.synchronize()
        except Exception as err:  # the backend's own words say what it cannot do
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            problems.append(f"{p.op} {p.dtype} {p.redop}: {reason}")
    everyone = backend.control.gather(problems)
    verdict = backend.control.broadcast(
        sorted({x for ps in everyone for x in ps}) if everyone is not None else None
    )
    if verdict:
        raise InputError(
            f"{backend.name} cannot run {'; '.join(verdict)} "
            "(choose another dtype, redop or collective, or another backend)"
        )


def point_key(op: str, dtype: str, requested_bytes: int, in_place: bool) -> str:
    return f"{op}/{dtype}/{requested_bytes}/{int(in_place)}"


def measured_points(run_dir: Any) -> set[str]:
    """Points a run directory already holds good rows for (what `resume=` skips)."""
    from gpulane.record import read_rows
    from gpulane.rundir import RunDir

    path = RunDir.at(run_dir).rows_path
    if not path.exists():
        return set()
    return {
        point_key(
            r.op,
            str(r.dtype),
            int(_requested_bytes(r)),
            bool(r.in_place),
        )
        for r in read_rows(path)
        if r.status == "ok" and r.kind == "collective" and r.time_us
    }


def _requested_bytes(row: Row) -> Any:
    """The size a point asked for (a row's size may be rounded to whole elements)."""
    return (row.extra or {}).get("requested_bytes", row.size_bytes)


def allowance_s(point: Point, plan: Any, backend: Backend) -> float:
    """Extra watchdog time for a large point: every operation of it at a slow path's rate."""
    floor_bps = 1e9 if backend.on_device else 1e8
    t = plan.timing
    ops = t.warmup + t.iters * (2 if backend.on_device else 1) + t.check_iters
    if t.graph:
        ops += t.iters * (t.graph_launches + 1)
    return ops * point.size_bytes / floor_bps


def _check_world(
    cfg: SweepConfig, ctx: RankContext, backend: Backend, versions: dict[str, str]
) -> list[dict[str, Any]]:
    """Every rank's facts (on rank 0; empty elsewhere), after checking the world."""
    gpus = None
    if backend.on_device:
        import torch

        gpus = torch.cuda.device_count()
    facts = rank_facts(ctx.rank, ctx.host, versions, str(getattr(backend, "device", "cpu")), gpus)
    everyone = backend.control.gather(facts)
    problem = None
    if everyone is not None:
        try:
            ranks = cfg.ranks
            expected = ranks if isinstance(ranks, int) else cfg.world_size
            check_world(everyone, expected, ctx.run_dir)
            if backend.on_device:  # pre-flight: what else runs on the GPUs, and their clocks
                record_gpu_state(ctx.run_dir, "before", own_pids_of(everyone))
        except InputError as err:
            problem = str(err)
    problem = backend.control.broadcast(problem)
    if problem:
        raise InputError(problem)
    return everyone or []


def where_ranks_run(
    cfg: SweepConfig, facts: list[dict[str, Any]], on_device: bool
) -> tuple[list[str] | None, int, str | None]:
    """(hosts, nodes, path label) of the world, as the ranks found it, whatever started
    them: NET across hosts, else the worst label among this host's GPUs."""
    hosts = sorted({str(f["host"]) for f in facts}) or None
    nodes = len(hosts) if hosts else int(cfg.nodes or 1)
    if nodes > 1:
        return hosts, nodes, "NET"
    if cfg.path or not on_device:
        return hosts, nodes, cfg.path
    from gpulane.topology.live import worst_path_for_gpus

    return hosts, nodes, worst_path_for_gpus(list(range(len(facts))))


def ranks_run_nccl(cfg: SweepConfig, backend: Backend) -> bool:
    """Whether the ranks talk through NCCL (their rows carry NCCL's transport)."""
    return backend.on_device and backend_of(cfg).uses_nccl


def _nccl_found(nccl: NcclLogs | None, ctx: RankContext, path: str | None) -> dict[str, Any] | None:
    """``extra.nccl`` for the next row; the transport is noted for the header once known."""
    if nccl is None:
        return None
    found, note = nccl.for_row(path)
    if note:
        ctx.note(note)
    return found


def run_rank(
    cfg: SweepConfig,
    ctx: RankContext,
    on_row: Callable[[Row], None] | None = None,
    plan: SweepPlan | None = None,
) -> None:
    """This rank's sweep of ``plan``: the one the session worked out, given here (a rank
    in the session's own process) or left in the run directory for the rank to read."""
    if plan is None:
        from gpulane.rundir import RunDir

        plan = SweepPlan.from_dict(RunDir.at(ctx.run_dir).read_plan())
    if cfg.graph:
        # Only graph replays touch the communicator while timing, and the harness
        # synchronizes around them, so NCCL may skip its guards for captured and
        # uncaptured work of one communicator outstanding at once (a per-launch cost).
        os.environ.setdefault("NCCL_GRAPH_MIXING_SUPPORT", "0")
    started = time.time()
    backend = make_backend(cfg, ctx)
    try:
        _sweep(cfg, plan.for_device(backend.on_device), ctx, backend, on_row, started)
        if wants_torch_overhead(cfg) and backend_of(cfg).times_torch_beside:
            from gpulane.collectives.overhead import measure_torch_overhead

            measure_torch_overhead(backend, plan.timing, ctx.run_dir)
    finally:
        backend.close()


def wants_torch_overhead(cfg: SweepConfig) -> bool:
    """torch_overhead as the front saved it (true/false; auto was resolved there)."""
    return str(cfg.torch_overhead).lower() == "true"


def _sweep(
    cfg: SweepConfig,
    plan: SweepPlan,
    ctx: RankContext,
    backend: Backend,
    on_row: Callable[[Row], None] | None,
    started: float,
) -> None:
    points = [p for _, p in plan.points(ctx.world_size)]
    versions = {"gpulane": __version__, **backend.versions()}
    facts = _check_world(cfg, ctx, backend, versions)
    hosts, nodes, path = (
        where_ranks_run(cfg, facts, backend.on_device) if facts else (None, 1, None)
    )
    backend.reserve(points)
    preflight(backend, cfg, points)
    if wants_ranging(cfg):  # no rows: the forecast's first look at the large sizes
        range_sweep(backend, plan, ctx, lambda p: allowance_s(p, plan, backend))
    writer = own_rows_writer(ctx.run_dir) if ctx.is_leader else None
    # Other processes on this run's GPUs (pre-flight read them): on every row.
    busy = foreign_on_gpus(ctx.run_dir) if writer is not None else None
    # What NCCL connected, from its own init lines (the communicator exists after preflight).
    nccl = NcclLogs(ctx.run_dir, since=started) if writer and ranks_run_nccl(cfg, backend) else None
    env = shaping_env()
    corrupt_rank = cfg.corrupt_rank
    skip_rank = cfg.skip_rank
    done = measured_points(ctx.run_dir) if cfg.resume else set()
    index = 0
    for point in points:
        runnable = [ip for ip in plan.placements if backend.supports(point, ip) is None]
        # Why a placement asked for is not measured: the table's n/a footnote.
        not_measured = {
            ("in-place" if ip else "out-of-place"): str(backend.supports(point, ip))
            for ip in plan.placements
            if ip not in runnable
        }
        for in_place in runnable:
            if point_key(point.op, point.dtype, point.requested_bytes, in_place) in done:
                continue
            ctx.heartbeat(index, point_label(point, in_place), allowance_s(point, plan, backend))
            index += 1
            skip = skip_rank == ctx.rank and index == SKIP_AT_POINT
            m = measure(
                backend, point, in_place, plan.timing, corrupt=corrupt_rank == ctx.rank, skip=skip
            )
            gathered = backend.control.gather(m)
            if writer is None or gathered is None:
                continue
            s = summarize(point, gathered)
            wrong = s.wrong or 0
            found = _nccl_found(nccl, ctx, path)
            row = Row.collective(
                str(cfg.run_id),
                backend.name,
                point,
                in_place,
                s,
                build=str(cfg.build),
                host=ctx.host,
                nodes=nodes,
                world_size=ctx.world_size,
                graph=plan.timing.graph,
                iters=plan.timing.iters,
                path=path,
                transport=found.get("transport") if found else None,
                source="measured",
                env=env,
                versions=versions,
                extra={
                    "requested_bytes": point.requested_bytes,
                    "placements": len(runnable),
                    "not_measured": not_measured or None,
                    "launcher": ctx.info.launcher,
                    "hosts": hosts,
                    **backend.row_extra(),
                    **({"nccl": found} if found else {}),
                    # {} when NVML read the GPUs and found no other process
                    **({"foreign": busy} if busy is not None else {}),
                },
                status="ok" if wrong == 0 else "error",
                error=None if wrong == 0 else f"{wrong} wrong elements",
            )
            writer.write(row)
            if on_row is not None:
                on_row(row)
    ctx.heartbeat(index, "done")
    backend.control.barrier()
    if writer is not None:
        writer.close()
        if backend.on_device:
            record_gpu_state(ctx.run_dir, "after", own_pids_of(facts))
