"""A campaign's rounds: jobs that share no node, started side by side, waited for together,
with the nodes Slurm loses kept track of.

Before each round the campaign asks the launcher (Slurm) which of its nodes are down, drained or not
answering; a job that would need one is skipped (a job pinned to a dead node would wait in
the queue for ever). A job that ends NODE_FAIL names the node Slurm lost (sinfo's state and
reason); its rows are kept, and the campaign goes on without that node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulane.campaigns.elements import (
    Element,
    ElementPlan,
    new_element,
    start_element,
    wait_elements,
)
from gpulane.launch.registry import entry
from gpulane.rundir import RunDir
from gpulane.session.output import Say, stdout


@dataclass
class Skipped:
    label: str
    nodes: list[str]
    reason: str


@dataclass
class Campaign:
    """What the steps of one campaign share: how jobs start, and the nodes lost so far."""

    plan: ElementPlan
    poll_s: float
    lost: dict[str, str] = field(default_factory=dict)  # node -> why, in words
    skipped: list[Skipped] = field(default_factory=list)
    elements: list[Element] = field(default_factory=list)
    say: Say = stdout  # where its lines go

    def check_nodes(self, nodes: list[str], when: str) -> None:
        """Ask the launcher (Slurm: sinfo) about ``nodes``; those gone are lost from here
        on (said once)."""
        launch = self.plan.launch
        if launch is None or not nodes:
            return
        for node, why in entry(launch.launcher).launcher.lost_nodes(launch, nodes).items():
            if node not in self.lost:
                self.lost[node] = f"{why} {when}"
                self.say(f"# node {node} is lost: {why}; left out from here on")

    def active(self, nodes: list[str]) -> list[str]:
        return [n for n in nodes if n not in self.lost]

    def run_round(self, group: RunDir, jobs: list[tuple[str, list[str]]]) -> list[Element]:
        """Start ``jobs`` (label, nodes) side by side and wait for all of them; the ones
        that need a lost node are skipped. Returns the elements that ran, in job order."""
        self.check_nodes(sorted({n for _, nodes in jobs for n in nodes}), "before the round")
        batch: list[Element] = []
        for label, nodes in jobs:
            gone = [n for n in nodes if n in self.lost]
            if gone:
                why = f"node {', '.join(gone)} lost"
                self.skipped.append(Skipped(label, list(nodes), why))
                self.say(f"# {label}: skipped ({why})")
                continue
            e = start_element(self.plan, new_element(group, label, nodes))
            self.say(f"# {label}: {started(e)} -> {e.run.path}")
            batch.append(e)
        wait_elements(batch, self.poll_s)
        self.elements += batch
        for e in batch:
            result = e.session.result if e.session is not None else None
            lost = dict(result.details.get("lost_nodes") or {}) if result is not None else {}
            for node, why in lost.items():
                if node not in self.lost:
                    self.lost[node] = f"{why}: NODE_FAIL of slurm job {e.job_id} ({e.label})"
                    self.say(
                        f"# node {node} lost during {e.label} (slurm job {e.job_id} NODE_FAIL: "
                        f"{why}); its rows so far are kept in {e.run.path}; going on without it",
                    )
        return batch


def started(e: Element) -> str:
    launcher = e.session.launcher if e.session is not None else None
    if e.job_id == "-" or launcher is None:
        return "started"
    return f"{launcher.name} job {e.job_id}"
