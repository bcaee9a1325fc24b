"""A campaign's elements: one ordinary run on a subset of nodes, in its own run directory
under the campaign's group directory, started by whatever launcher the configuration names
(on those hosts), and followed side by side with the others of its round."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gpulane.collectives.plan import SweepPlan, build_plan
from gpulane.collectives.table import SweepView
from gpulane.config.commands import SweepConfig
from gpulane.launch.base import Launcher, LaunchPlan, LaunchSpec
from gpulane.launch.registry import node_launcher
from gpulane.rundir import RunDir, rank_env, save_config
from gpulane.session.run import RunSession, SessionSpec
from gpulane.session.signals import Terminated, sigterm_as_exception, stop_words
from gpulane.session.sweep import uses_nccl

JOB = "gpulane.collectives.sweep:run_rank"

__all__ = ["JOB", "Element", "ElementPlan", "new_element"]


@dataclass
class Element:
    label: str
    nodes: list[str]
    run: RunDir
    session: RunSession | None = None
    state: str = "PENDING"
    failure: str | None = None
    status: int = 0

    @property
    def job_id(self) -> str:
        launcher = self.session.launcher if self.session is not None else None
        job = launcher.job_id if launcher is not None else None
        return str(job) if job is not None else "-"


def new_element(group: RunDir, label: str, nodes: list[str]) -> Element:
    path = group.path / label
    path.mkdir(parents=True, exist_ok=False)
    return Element(label, list(nodes), RunDir(f"{group.run_id}.{label}", path, group.build))


@dataclass(frozen=True)
class ElementPlan:
    """How every element is launched: the settings of its launcher for n nodes."""

    cfg: SweepConfig
    env: dict[str, str]
    ranks_per_node: int
    device: str
    launch: LaunchPlan | None  # the launcher's plan, made once for the whole campaign
    job: str = JOB  # what every rank runs
    sweep: SweepPlan | None = None  # the plan the session worked out (None: from cfg, once)

    def launcher(self, nodes: list[str]) -> Launcher:
        """The configured launcher, its ranks on ``nodes`` (from the one registry)."""
        return node_launcher(self.cfg, self.device, nodes, self.launch)


def start_element(plan: ElementPlan, e: Element) -> Element:
    """Save the element's configuration and start its launch (no table: a line per state)."""
    world = len(e.nodes) * plan.ranks_per_node
    saved = save_config(plan.cfg, e.run, world_size=world, nodes=len(e.nodes), device=plan.device)
    lines = plan.sweep or build_plan(saved, plan.device == "cuda")
    e.run.save_plan(lines.to_dict())  # what the ranks measure
    spec = SessionSpec(
        command="sweep",
        kind="collective",
        backend=str(saved.backend.name),
        description=f"{saved.backend.name} on {','.join(e.nodes)}",
        world_size=world,
    )
    view = SweepView(lines.lines, len(lines.placements))
    e.session = RunSession(e.run, spec, view, plan.env, progress=False, label=e.label)
    launch = LaunchSpec(
        e.run.path,
        world,
        rank_env(e.run.path, plan.env, uses_nccl(saved, plan.device)),
        float(saved.timeout_s),
        job=plan.job,
        run_id=e.run.run_id,
        hosts=list(e.nodes),
    )
    e.session.begin(plan.launcher(e.nodes), launch)
    return e


def wait_elements(elements: list[Element], poll_s: float) -> None:
    """Follow every element until all have ended, then conclude each (error rows, Parquet).
    Ctrl-C (or SIGTERM) cancels the ones still going, keeps their rows and re-raises."""
    going = [e for e in elements if e.session is not None]
    with sigterm_as_exception():
        try:
            while going:
                for e in list(going):
                    assert e.session is not None
                    if e.session.step():
                        going.remove(e)
                if going:
                    time.sleep(poll_s)
        except (KeyboardInterrupt, Terminated) as ex:
            for e in going:
                assert e.session is not None
                e.session.interrupt(ex)
                e.state, e.failure = "CANCELLED", stop_words(ex)[1]
            raise
    for e in elements:
        if e.session is None or e in going:
            continue
        e.status = e.session.finish()
        e.failure = e.session.failure
        said = e.session.launcher.job_state if e.session.launcher is not None else None
        e.state = said or ("FAILED" if e.failure else "COMPLETED")
