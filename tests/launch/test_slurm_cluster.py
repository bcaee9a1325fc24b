"""Cluster acceptance on the 8-node Slurm in network namespaces (``scripts/slurm-up.sh 8``:
nodes c1..c8, each slurmd in its own network namespace, links shaped to 1 Gbit/s), with
real faults from ``scripts/slurm-fault.sh``: a node slowed to a tenth (tc tbf), a lossy
link (1 % of wire packets dropped, nftables: this kernel has no netem), a node lost
mid-job (its link down, its processes killed). Nothing here is mocked; where Slurm,
namespaces, tc or nftables are missing or not permitted, the tests fail and say so.

The measurements are small (256 KiB to 1 MiB all-reduces between gloo ranks), the
campaigns short: the whole module takes a few minutes on the 2-core CI machine.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpulane.record import read_rows
from tests.helpers import gpulane

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
CONF = "/etc/slurm-nodes/slurm.conf"
NODES = [f"c{i}" for i in range(1, 9)]
PAIRS = "c[1-4]"  # the pairs campaign's nodes
FAULT = REPO / "scripts" / "slurm-fault.sh"
# Every campaign here: CPU ranks, all_reduce only, a quick poll, noise-proof outliers (a
# slowed node is 90 % below its peers; CPU-load noise on a shared machine mostly stays
# under 50 %: per-node jobs, 8 side by side, once saw a healthy node 50 % below).
COMMON = ("launcher.poll_s=0.5", "launcher.time=10")


def sinfo(env: dict[str, str]) -> dict[str, str]:
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=30, env=env
    )
    return dict(line.split() for line in out.stdout.splitlines() if line.strip())


def fault(node: str, action: str, *peer: str, loss_pct: int = 1) -> str:
    """Inject (or clear) a fault; a fault that cannot be made fails the test with why."""
    env = {**os.environ, "GPULANE_SLURM_LOSS_PCT": str(loss_pct)}
    proc = subprocess.run(
        ["bash", str(FAULT), node, action, *peer],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"slurm-fault.sh {node} {action} failed (namespaces, tc and nftables must be "
        f"permitted here): {proc.stderr.strip() or proc.stdout.strip()}"
    )
    return proc.stdout


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, str]]:
    """The environment for the 8-node cluster; fails when it is not up. Every fault is
    cleared afterwards, whatever the tests left."""
    env = {**os.environ, "SLURM_CONF": CONF}
    try:
        states = sinfo(env)
    except (OSError, subprocess.SubprocessError) as err:
        pytest.fail(f"sinfo failed ({err}); start the cluster with: scripts/slurm-up.sh 8")
    if sorted(states) != sorted(NODES) or not all(
        s.startswith(("idle", "mixed", "alloc", "completing")) for s in states.values()
    ):
        pytest.fail(
            f"the 8-node Slurm in network namespaces is not up (sinfo: {states or 'nothing'}); "
            "start it with: scripts/slurm-up.sh 8"
        )
    yield env
    for node in NODES:
        fault(node, "clear")


def campaign(
    env: dict[str, str], tmp_path: Path, *args: str, outliers: float = 0.5
) -> tuple[Any, float]:
    t0 = time.monotonic()
    res = gpulane(
        *args, *COMMON, f"launcher.outlier_fraction={outliers}", f"results_dir={tmp_path}",
        cwd=REPO, env=env, timeout=900,
    )  # fmt: skip
    return res, time.monotonic() - t0


def accept_args(pattern: str, *more: str) -> list[str]:
    return [
        "accept",
        "launcher=slurm",
        f"launcher.pattern={pattern}",
        "suite.collectives=[all_reduce]",
        "suite.sizes_min=1M",
        "suite.sizes_max=1M",
        "suite.sweep_overrides=['iters=10','warmup=1','device=cpu']",
        "format=json",
        "device=cpu",  # CPU nodes, accepted knowingly (no GPU: INCOMPLETE otherwise)
        *more,
    ]


def failed_checks(group: Path) -> list[dict[str, Any]]:
    result = json.loads((group / "accept.json").read_text())
    return [c for c in result["checks"] if c["status"] == "fail"]


def only_dir(root: Path) -> Path:
    (group,) = [p for p in root.iterdir() if p.is_dir()]
    return group


# --------------------------------------------------------------------------- the faults


def test_faults_are_real_qdiscs_and_rules(cluster: dict[str, str]) -> None:
    facts = dict(
        line.split("=", 1)
        for line in Path("/run/gpulane-slurm/node-c8").read_text().splitlines()
        if "=" in line
    )
    dev, ns = facts["DEV"], facts["NS"]

    def qdiscs() -> str:
        host = subprocess.run(["tc", "qdisc", "show", "dev", dev], capture_output=True, text=True)
        inner = subprocess.run(
            ["tc", "-n", ns, "qdisc", "show"], capture_output=True, text=True, check=True
        )
        return host.stdout + inner.stdout

    assert qdiscs().count("rate 1Gbit") == 3  # the line rate: into, out of and within c8
    try:
        assert "a tenth" in fault("c8", "slow")
        assert qdiscs().count("rate 100Mbit") == 3
        fault("c8", "lossy", "c7")
        rules = subprocess.run(
            ["nsenter", f"--net=/run/netns/{ns}", "nft", "list", "table", "inet", "gpulane_fault"],
            capture_output=True,
            text=True,
        )
        assert (
            "ip saddr 10.77.0.107" in rules.stdout and "numgen random mod 100 < 1" in rules.stdout
        )
    finally:
        fault("c8", "clear")
    assert qdiscs().count("rate 1Gbit") == 3
    bad = subprocess.run(["bash", str(FAULT), "c8", "melt"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
    unknown = subprocess.run(["bash", str(FAULT), "c99", "slow"], capture_output=True, text=True)
    assert unknown.returncode == 1 and "no node c99" in unknown.stderr


# ------------------------------------------------------------ a slowed node, three ways


def test_accept_pairs_names_the_slowed_node(cluster: dict[str, str], tmp_path: Path) -> None:
    # Four of the eight nodes: 6 pair jobs in 3 rounds of 2 side by side. Over all eight the
    # campaign is 28 jobs in 7 rounds (56 task starts, each importing torch: ~190 CPU-s of
    # CI's two cores) and tells nothing more of the campaign: the rounds of 8 and of 1024
    # nodes are tests/campaigns/test_plans.py's, and halving and per-node run over all 8.
    fault("c3", "slow")
    try:
        res, wall = campaign(
            cluster, tmp_path, *accept_args("pairs", f"launcher.nodelist='{PAIRS}'")
        )
    finally:
        fault("c3", "clear")
    print(f"pairs over 4 nodes: {wall:.0f} s")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-2000:]
    group = only_dir(tmp_path)
    checks = failed_checks(group)
    (node,) = [c for c in checks if c["basis"] == "pairs node"]
    assert node["subject"] == "c3" and node["message"].startswith("all 3 of its pairs are slow")
    outliers = {c["subject"] for c in checks if c["basis"] == "pairs outlier"}
    assert outliers == {"c1+c3", "c2+c3", "c3+c4"}
    # The fabric: c3's row is about a tenth of the others, and outlined as outliers.
    (fabric_path,) = group.rglob("fabric.json")
    fabric = json.loads(fabric_path.read_text())
    assert fabric["nodes"] == NODES[:4] and fabric["suspects"] == {"c3": 3}
    row = fabric["matrix"][2]
    others = [
        v for i, r in enumerate(fabric["matrix"]) for j, v in enumerate(r) if 2 not in (i, j) and v
    ]
    assert len(others) == 6  # c1+c2, c1+c4, c2+c4, each way
    assert row[2] is None and max(row[:2] + row[3:]) < 0.3 * statistics.median(others)
    assert (fabric_path.parent / "fabric.svg").read_text().count("<svg") == 1


def test_accept_halving_names_the_slowed_node(cluster: dict[str, str], tmp_path: Path) -> None:
    fault("c6", "slow")
    try:
        res, wall = campaign(cluster, tmp_path, *accept_args("halving"))
    finally:
        fault("c6", "clear")
    print(f"halving over 8 nodes: {wall:.0f} s")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-2000:]
    group = only_dir(tmp_path)
    (slow,) = [c for c in failed_checks(group) if c["basis"] == "halving"]
    assert slow["subject"] == "c6" and "against the reference" in slow["message"]
    (summary,) = [p for p in group.rglob("summary.json") if "halving" in p.read_text()]
    data = json.loads(summary.read_text())
    assert data["slow"] == ["c6"]
    # Whole set, two halves side by side, two quarters, two nodes beside healthy partners;
    # a healthy quarter slow at a busy moment is resolved too, then measured once more.
    assert data["steps"][0]["nodes"] == NODES
    assert [s["nodes"] for s in data["steps"][1:3]] == [NODES[:4], NODES[4:]]
    if "slow once, not again" in data["note"]:
        assert data["rounds"] == 5 and len(data["steps"]) == 7 + 2 + 1, data
    else:
        assert data["rounds"] == 4 and len(data["steps"]) == 7, data


def test_accept_per_node_then_allocation(cluster: dict[str, str], tmp_path: Path) -> None:
    fault("c2", "slow")
    try:
        res, wall = campaign(
            cluster,
            tmp_path,
            *accept_args("per-node+allocation", "launcher.tasks_per_node=2"),
            outliers=0.75,  # c2 is 90 % below; 8 busy jobs side by side, up to 50 %
        )
    finally:
        fault("c2", "clear")
    print(f"per-node + allocation over 8 nodes: {wall:.0f} s")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-2000:]
    group = only_dir(tmp_path)
    named = [c for c in failed_checks(group) if c["basis"] == "per-node outlier"]
    assert [c["subject"] for c in named] == ["c2"] and "below the median" in named[0]["message"]
    sweep = next(group.rglob("per-node")).parent  # the campaign's group, in accept's
    steps = {p.parent.name: json.loads(p.read_text()) for p in sweep.rglob("summary.json")}
    assert json.loads((sweep / "summary.json").read_text())["named_nodes"] == {"c2": "per-node"}
    allocation = steps["allocation"]
    assert allocation["nodes"] == [n for n in NODES if n != "c2"]  # left out after per-node
    assert allocation["passed"] and allocation["left_out"] == {"c2": "per-node"}


# -------------------------------------------------------------- a lossy link, a lost node


def test_lossy_link_names_its_pair(cluster: dict[str, str], tmp_path: Path) -> None:
    # TCP loses most to loss at medium messages (a lost tail waits for a retransmit
    # timeout): the pairs are judged at 256 KiB. At 1 % (and at 3 %) a lost tail was too
    # rare in 50 iterations for the pair to fall reliably past the 50 % outlier limit on
    # this busy 2-core box (one CI run: 46 % below; two runs at 3 %: not below at all);
    # at 10 % it does.
    fault("c2", "lossy", "c3", loss_pct=10)
    try:
        res, _ = campaign(
            cluster,
            tmp_path,
            "sweep",
            "launcher=slurm",
            "launcher.pattern=pairs",
            "launcher.nodelist='c[1-4]'",
            "device=cpu",
            "sizes.min=128K",
            "sizes.max=256K",
            "iters=50",
            "warmup=1",
        )
    finally:
        fault("c2", "clear")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-2000:]
    summary = json.loads((only_dir(tmp_path) / "summary.json").read_text())
    # A pair is named by being slow past the limit or by failing: at 10 % loss a gloo job
    # can fail outright (a CI run saw c2+c3 FAILED), which names the link as well.
    named = {e["label"]: e["outlier"] or e["failure"] for e in summary["elements"]}
    assert named["c2+c3"], res.stdout
    failed = [e["label"] for e in summary["elements"] if e["failure"]]
    assert failed in ([], ["c2+c3"]), res.stdout
    # The lossy pair is the slowest by far (a failed one has no figure); on a busy 2-core
    # box one more pair can dip below the limit for a moment, which is why c2+c3 is
    # checked as the worst, not alone.
    worst = min(
        summary["elements"],
        key=lambda e: -1.0 if e["failure"] else min(e["figures"].values(), default=1e9),
    )
    assert worst["label"] == "c2+c3", res.stdout
    assert "c2" not in summary["suspect_nodes"] and "c3" not in summary["suspect_nodes"]


def test_node_lost_mid_run(cluster: dict[str, str], tmp_path: Path) -> None:
    # A ring over c5..c8: round 1 runs c5+c6 and c7+c8; c8 dies while c7+c8 measures.
    args = [
        "sweep",
        "launcher=slurm",
        "launcher.pattern=ring",
        "launcher.nodelist='c[5-8]'",
        "device=cpu",
        "sizes.min=64K",
        "sizes.max=1M",
        "iters=100",
        "warmup=1",
        *COMMON,
        "launcher.outlier_fraction=0.5",
        f"results_dir={tmp_path}",
    ]
    env = {**cluster, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        ["python3", "-m", "gpulane", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            rows = list(tmp_path.glob("*/c7+c8/rows.jsonl"))
            if rows and rows[0].read_text().count("\n") >= 1:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        else:
            pytest.fail("c7+c8 wrote no row in 300 s")
        fault("c8", "down")
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        fault("c8", "clear")
    assert proc.returncode == 1, out[-3000:] + err[-2000:]
    group = only_dir(tmp_path)
    summary = json.loads((group / "summary.json").read_text())
    assert list(summary["lost_nodes"]) == ["c8"] and "NODE_FAIL" in summary["lost_nodes"]["c8"]
    element = {e["label"]: e for e in summary["elements"]}
    assert element["c7+c8"]["state"] == "NODE_FAIL" and element["c5+c6"]["state"] == "COMPLETED"
    # The job's rows are kept: the sizes measured before the loss, then its error row.
    rows = [x.to_dict() for x in read_rows(group / "c7+c8" / "rows.jsonl")]
    assert rows[0]["status"] == "ok" and rows[-1]["status"] == "error"
    assert "NODE_FAIL" in rows[-1]["error"] and "c8" in rows[-1]["error"]
    # The campaign went on without c8: round 2 ran c6+c7, skipped c5+c8.
    assert element["c6+c7"]["state"] == "COMPLETED" and "c5+c8" not in element
    assert summary["skipped"] == [
        {"label": "c5+c8", "nodes": ["c5", "c8"], "reason": "node c8 lost"}
    ]
    assert "# lost node: c8" in out and "going on without it" in out
    assert sinfo(cluster)["c8"].startswith(("idle", "mixed", "alloc"))  # cleared again
