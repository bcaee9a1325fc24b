"""Cluster acceptance patterns (per-node, pairs, halving) and packed multiruns on Slurm.

The real-Slurm tests (marked ``slurm``) need scripts/slurm-up.sh and fail, not skip,
when it is down. That Slurm has ONE node: per-node runs for real on it; a pairs or
halving job needs two nodes or more, which one node cannot express, so those patterns
are tested here on node lists: their plans and the exact sbatch options (dry run), and
their whole front (rounds, run directories, summary, outliers, exit status) with the
jobs replaced by a fake that writes the rows a slow node would give.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from gpulane.campaigns import elements as campaign_elements
from gpulane.campaigns import rounds as campaign_rounds
from gpulane.campaigns import summary as campaign_summary
from gpulane.campaigns.elements import Element
from gpulane.campaigns.settings import PatternSettings, pattern_settings
from gpulane.config.common import SizesConfig
from gpulane.errors import InputError
from gpulane.launch.slurm.monitor import JobRecord
from gpulane.launch.slurm.settings import settings
from gpulane.record import Row, RowWriter, read_rows
from gpulane.rundir import RunDir, make_run_dir
from gpulane.session import packing
from tests import helpers
from tests.helpers import run_slurm
from tests.launch.test_slurm import REPO, direct_cfg, gpulane
from tests.launch.test_slurm import slurm as slurm  # the fixture, by name

NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]


def cfg_for(tmp_path: Path, **launcher: Any) -> Any:
    cfg = direct_cfg(tmp_path, **launcher)
    cfg.collectives = ["all_reduce"]
    cfg.dtype = "float"
    cfg.sizes = SizesConfig(min=8, max=64, factor=2, step=None)
    cfg.redop = "sum"
    cfg.root = 0
    cfg.in_place = "both"
    cfg.warmup = 1
    cfg.iters = 3
    cfg.check_iters = 1
    cfg.graph = False
    cfg.graph_launches = 1
    return cfg


def group_run(cfg: Any) -> RunDir:
    run = make_run_dir(cfg)
    cfg.run_id = run.run_id
    return run


# ------------------------------------------------------------------ settings and plans


def test_pattern_settings_expand_the_hostlist(tmp_path: Path) -> None:
    cfg = cfg_for(tmp_path, pattern="pairs", nodelist="gpu[01-04]", outlier_fraction=0.2)
    s = settings(cfg)
    ps = pattern_settings(cfg, None)  # the nodes named: the launcher is not asked
    assert s.pattern == "pairs" and ps.nodes == NODES and ps.outlier_fraction == 0.2
    cfg.launcher.nodelist = ["a1", "b2"]  # a YAML list is a hostlist too
    assert pattern_settings(cfg, None).nodes == ["a1", "b2"]
    cfg.launcher.outlier_fraction = 1.5
    with pytest.raises(InputError, match="outlier_fraction"):
        pattern_settings(cfg, None)
    cfg.launcher.pattern = "triangles"
    with pytest.raises(InputError, match=r"launcher\.pattern"):
        settings(cfg)


def dry_plan(tmp_path: Path, pattern: str, **launcher: Any) -> list[dict[str, Any]]:
    cfg = cfg_for(tmp_path, pattern=pattern, dry_run=True, **launcher)
    run = group_run(cfg)
    assert run_slurm(cfg, run, {}, "x:y") == 0
    assert not [p for p in run.path.iterdir() if p.is_dir()]  # nothing submitted
    plan: list[dict[str, Any]] = json.loads((run.path / "plan.json").read_text())
    for p in plan:  # each job named after its element's run (not gpulane-None)
        assert f"--job-name=gpulane-{run.run_id}.{p['label']}" in p["command"].split()
        p["sbatch"] = p.pop("command").split()[1:]  # the launcher's words: sbatch OPTIONS
    return plan


def test_per_node_jobs_are_pinned_to_their_node(tmp_path: Path, capsys: Any) -> None:
    plan = dry_plan(
        tmp_path, "per-node", nodelist="gpu[01-03]", gpus_per_node=8, tasks_per_node=None
    )
    assert [p["label"] for p in plan] == ["gpu01", "gpu02", "gpu03"]
    for p in plan:
        assert p["round"] == 1  # all at once
        assert f"--nodelist={p['label']}" in p["sbatch"]
        assert "--nodes=1" in p["sbatch"] and "--ntasks-per-node=8" in p["sbatch"]
        assert "--gpus-per-node=8" in p["sbatch"]
    out = capsys.readouterr().out
    assert "gpu02: sbatch " in out and "nothing submitted" in out


def test_pairs_jobs_in_rounds_of_disjoint_pairs(tmp_path: Path) -> None:
    plan = dry_plan(tmp_path, "pairs", nodelist="gpu[01-04]", tasks_per_node=2)
    assert len(plan) == 6 and max(p["round"] for p in plan) == 3
    for _, jobs in itertools.groupby(plan, key=lambda p: p["round"]):
        used = [n for p in jobs for n in p["nodes"]]
        assert len(used) == len(set(used)) == 4  # a round uses every node once
    pairs = sorted(tuple(p["nodes"]) for p in plan)
    assert pairs == sorted(itertools.combinations(NODES, 2))
    for p in plan:
        assert p["label"] == "+".join(p["nodes"])
        assert f"--nodelist={','.join(p['nodes'])}" in p["sbatch"]
        assert "--nodes=2" in p["sbatch"] and "--ntasks-per-node=2" in p["sbatch"]


def test_halving_dry_run_and_too_few_nodes(tmp_path: Path) -> None:
    plan = dry_plan(tmp_path, "halving", nodelist="gpu[01-04]")
    assert plan == [
        {
            "round": 1,
            "label": "step01-4nodes",
            "nodes": NODES,
            "sbatch": plan[0]["sbatch"],
        }
    ]
    assert "--nodes=4" in plan[0]["sbatch"]
    for pattern in ("pairs", "halving"):
        cfg = cfg_for(tmp_path, pattern=pattern, nodelist="gpu01", dry_run=True)
        with pytest.raises(InputError, match="at least 2 nodes"):
            run_slurm(cfg, group_run(cfg), {}, "x:y")
    cfg = cfg_for(tmp_path, pattern="pairs", nodelist="gpu[01-02]")
    cfg.collectives = ["all_gather"]
    with pytest.raises(InputError, match="include all_reduce"):
        run_slurm(cfg, group_run(cfg), {}, "x:y")


# ---------------------------------------------- the front with fake jobs (several nodes)


def bus_row(run_id: str, host: str, busbw: float, size: int = 64) -> Row:
    return Row(
        run_id=run_id,
        kind="collective",
        backend="torch-nccl",
        op="all_reduce",
        build="b",
        host=host,
        world_size=16,
        dtype="float",
        redop="sum",
        in_place=False,
        size_bytes=size,
        count=size // 4,
        time_us=1.0,
        algbw_gbps=busbw / 2,
        busbw_gbps=busbw,
        wrong=0,
    )


def fake_jobs(
    monkeypatch: Any, slow: set[str], failing: frozenset[str] = frozenset()
) -> list[list[str]]:
    """Replace submitting and waiting: each 'job' writes the rows its nodes would give
    (100 GB/s, 40 GB/s when a slow node is in it) or fails when a failing node is."""
    submitted: list[list[str]] = []

    def submit(plan: Any, e: Element) -> Element:
        submitted.append(list(e.nodes))
        if failing & set(e.nodes):
            e.state, e.failure = "FAILED", f"task 0 on {e.nodes[0]} raised"
            return e
        with RowWriter(e.run.path) as w:
            w.write(bus_row(e.run.run_id, e.nodes[0], 50.0, size=8))  # a smaller size: ignored
            w.write(bus_row(e.run.run_id, e.nodes[0], 40.0 if slow & set(e.nodes) else 100.0))
        e.state = "COMPLETED"
        return e

    monkeypatch.setattr(campaign_rounds, "start_element", submit)
    monkeypatch.setattr(campaign_rounds, "wait_elements", lambda elements, poll_s: None)
    return submitted


def test_per_node_names_the_slow_node(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    submitted = fake_jobs(monkeypatch, {"gpu03"})
    cfg = cfg_for(tmp_path, pattern="per-node", nodelist="gpu[01-04]")
    run = group_run(cfg)
    assert run_slurm(cfg, run, {}, "x:y") == 1
    assert submitted == [[n] for n in NODES]
    out = capsys.readouterr().out
    assert "# outlier node: gpu03: all_reduce float 64 B: 40 GB/s is 60.0% below" in out
    summary = json.loads((run.path / "summary.json").read_text())
    assert not summary["passed"]
    assert [e["outlier"] is not None for e in summary["elements"]] == [False, False, True, False]
    assert {e["label"]: e["figures"] for e in summary["elements"]}["gpu01"] == {
        "all_reduce float 64 B": 100.0
    }
    assert sorted(p.name for p in run.path.iterdir() if p.is_dir()) == NODES


def test_per_node_all_within_the_fraction(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    fake_jobs(monkeypatch, set())
    cfg = cfg_for(tmp_path, pattern="per-node", nodelist="gpu[01-04]")
    assert run_slurm(cfg, group_run(cfg), {}, "x:y") == 0
    assert "# no outlier among 4 nodes" in capsys.readouterr().out


def test_pairs_names_pairs_and_the_node_they_share(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    submitted = fake_jobs(monkeypatch, {"gpu02"}, failing=frozenset({"gpu04"}))
    cfg = cfg_for(tmp_path, pattern="pairs", nodelist="gpu[01-04]")
    run = group_run(cfg)
    assert run_slurm(cfg, run, {}, "x:y") == 1
    assert sorted(map(tuple, submitted)) == sorted(itertools.combinations(NODES, 2))
    out, err = capsys.readouterr()
    assert "# outlier pair: gpu01+gpu02" in out and "# outlier pair: gpu02+gpu03" in out
    assert "gpu02+gpu04" not in out.split("# outlier pair")[-1]  # failed, not an outlier
    assert "# node gpu02: all 3 of its pairs are slow or failed" in out
    assert "# node gpu04: all 3 of its pairs are slow or failed" in out
    assert "# node gpu01:" not in out
    assert "gpulane: error: gpu01+gpu04: task 0 on gpu01 raised" in err
    summary = json.loads((run.path / "summary.json").read_text())
    assert summary["suspect_nodes"] == {"gpu02": 3, "gpu04": 3}


def test_halving_runs_a_job_per_measured_subset(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    nodes = [f"gpu{i:02d}" for i in range(1, 9)]
    submitted = fake_jobs(monkeypatch, {"gpu06"})
    cfg = cfg_for(tmp_path, pattern="halving", nodelist="gpu[01-08]")
    run = group_run(cfg)
    assert run_slurm(cfg, run, {}, "x:y") == 1
    assert submitted[0] == nodes  # the whole set first, then halves
    assert submitted[1:3] == [nodes[:4], nodes[4:]]
    out = capsys.readouterr().out
    assert "# slow node(s): gpu06" in out
    summary = json.loads((run.path / "summary.json").read_text())
    assert summary["slow"] == ["gpu06"] and summary["reference_gbps"] == 100.0
    steps = summary["steps"]
    assert len(steps) == len(submitted) and steps[0]["label"] == "step01-8nodes"
    assert [s["figure_gbps"] for s in steps[:3]] == [40.0, 100.0, 40.0]
    assert all(Path(s["run_dir"]).parent == run.path for s in steps)


def test_halving_without_a_slow_node(tmp_path: Path, monkeypatch: Any) -> None:
    fake_jobs(monkeypatch, set())
    cfg = cfg_for(tmp_path, pattern="halving", nodelist="gpu[01-04]", halving_good=100.0)
    assert run_slurm(cfg, group_run(cfg), {}, "x:y") == 0


def test_summary_on_a_list_of_elements(tmp_path: Path, capsys: Any) -> None:
    # The outlier rule itself, straight on run directories: 16 nodes, two of them slow.
    group = RunDir("g", tmp_path, "b")
    elements = []
    for i in range(16):
        e = campaign_elements.new_element(group, f"n{i:02d}", [f"n{i:02d}"])
        busbw = {3: 85.0, 11: 89.0}.get(i, 100.0 + i % 3)
        with RowWriter(e.run.path) as w:
            w.write(bus_row(e.run.run_id, e.label, busbw))
        e.state = "COMPLETED"
        elements.append(e)
    ps = PatternSettings([e.label for e in elements], 0.1, None, False)
    status, data = campaign_summary.summarize(tmp_path, "per-node", elements, ps)
    assert status == 1
    named = [e["label"] for e in data["elements"] if e["outlier"]]
    assert named == ["n03", "n11"]  # 85 and 89 are more than 10% below a median of 101


# ------------------------------------------------------------------------- real Slurm


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm")
def test_per_node_on_the_one_node(tmp_path: Path) -> None:
    res = gpulane(
        "sweep",
        "launcher=slurm",
        "launcher.pattern=per-node",
        "launcher.tasks_per_node=2",
        "launcher.poll_s=0.5",
        "launcher.time=5",
        "device=cpu",
        "sizes.max=64",
        "iters=3",
        "warmup=1",
        f"results_dir={tmp_path}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    group = next(tmp_path.iterdir())
    summary = json.loads((group / "summary.json").read_text())
    (element,) = summary["elements"]
    node = element["label"]
    assert summary["nodes"] == [node]  # from sinfo: the partition's one node
    run = group / node
    rows = [x.to_dict() for x in read_rows(run / "rows.jsonl")]
    assert [r["size_bytes"] for r in rows] == [8, 16, 32, 64]
    assert all(r["status"] == "ok" and r["world_size"] == 2 and r["host"] == node for r in rows)
    record = JobRecord.load(run)
    assert record.state == "COMPLETED" and element["job_id"] == record.job_id
    sbatch = next((run / "slurm").rglob("*_submission.sh")).read_text()
    assert f"#SBATCH --nodelist={node}" in sbatch
    assert re.search(rf"^{node}\s+{record.job_id}\s+COMPLETED\s.*\sok$", res.stdout, re.M)
    assert "no peers to compare" in res.stdout


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm")
def test_pack_two_combinations_in_one_job(tmp_path: Path) -> None:
    res = gpulane(
        "sweep",
        "-m",
        "launcher=slurm",
        "launcher.pack=true",
        "launcher.tasks_per_node=2",
        "launcher.poll_s=0.5",
        "device=cpu",
        "sizes.max=16",
        "iters=3",
        "warmup=1",
        "dtype=float,int32",
        f"results_dir={tmp_path}",
        f"hydra.sweep.dir={tmp_path}/multirun",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    runs = sorted(p for p in tmp_path.iterdir() if (p / "rows.jsonl").exists())
    assert len(runs) == 2, list(tmp_path.iterdir())
    jobs = {JobRecord.load(r).job_id for r in runs}
    assert len(jobs) == 1, jobs  # one job for both
    assert res.stdout.count("combinations packed into slurm job") == 1
    dtypes = []
    for run in runs:
        rows = [x.to_dict() for x in read_rows(run / "rows.jsonl")]
        assert len(rows) == 2 and all(r["status"] == "ok" and r["world_size"] == 2 for r in rows)
        dtypes += sorted({r["dtype"] for r in rows})
        assert JobRecord.load(run).state == "COMPLETED" and (run / "rows.parquet").exists()
    assert sorted(dtypes) == ["float", "int32"]
    # No job array: hydra-submitit-launcher was not used.
    assert not (tmp_path / "multirun" / ".submitit").exists()


def write_one_row(cfg: Any, ctx: Any) -> None:
    if ctx.rank == 0:
        with RowWriter(ctx.run_dir) as w:
            w.write(bus_row(str(cfg.run_id), ctx.host, 1.0))


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm")
def test_pack_stops_at_a_failing_combination(tmp_path: Path) -> None:
    # Three combinations, the second fails in rank 1: the first keeps its rows, the
    # second gets the error row naming the task, the third says it was not completed
    # (rank 0, which did not fail, may have written its row there: it is kept).
    packing.start_packing()
    runs = []
    for job in ("write_one_row", "fail_on_rank_1", "write_one_row"):
        cfg = direct_cfg(tmp_path, pack=True)
        run = make_run_dir(cfg)
        module = "test_slurm" if job == "fail_on_rank_1" else "test_slurm_patterns"
        assert run_slurm(cfg, run, {}, f"tests.launch.{module}:{job}") == 0  # queued
        runs.append(run.path)
    assert packing.finish_packing() == 1
    assert not packing.packing()
    assert len({JobRecord.load(r).job_id for r in runs}) == 1
    first, second, third = ([x.to_dict() for x in read_rows(r / "rows.jsonl")] for r in runs)
    assert [r["status"] for r in first] == ["ok"]
    errors = [r for r in second if r["status"] == "error"]
    assert len(errors) == 1 and errors[0]["extra"]["task"] == 1
    assert "disk on fire in rank 1" in errors[0]["error"]
    (err,) = [r for r in third if r["status"] == "error"]
    assert "not completed: the packed job ended at combination #2" in err["error"]
    assert "task 1" in err["error"]


def test_pattern_under_multirun_is_refused(tmp_path: Path) -> None:
    res = gpulane(
        "sweep",
        "-m",
        "launcher=slurm",
        "launcher.pattern=per-node",
        "dtype=float,int32",
        f"results_dir={tmp_path}",
        f"hydra.sweep.dir={tmp_path}/multirun",
        timeout=60,
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert "campaign.pattern=per-node submits its own jobs; run it without -m" in res.stderr


def test_settings_pack_default_off() -> None:
    cfg = OmegaConf.create({"launcher": {"name": "slurm"}})
    s = settings(cfg)
    assert s.pack is False and s.pattern == "allocation"


# ------------------------------------ two "hosts": the 2-node cluster in network namespaces

PAIR_CONF = "/etc/slurm-pair/slurm.conf"


@pytest.fixture(scope="session")
def slurm_pair() -> dict[str, str]:
    """The environment for scripts/slurm-up.sh's 2-node cluster (n1, n2, each in its own
    network namespace); fails the test when it is not up."""
    env = {**os.environ, "SLURM_CONF": PAIR_CONF, "PYTHONUNBUFFERED": "1"}
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
    except (OSError, subprocess.SubprocessError) as err:
        pytest.fail(f"sinfo failed ({err}); run scripts/slurm-up.sh")
    nodes = dict(line.split() for line in out.stdout.splitlines() if line.strip())
    if (
        out.returncode != 0
        or sorted(nodes) != ["n1", "n2"]
        or not all(s.startswith(("idle", "mixed", "alloc", "completing")) for s in nodes.values())
    ):
        pytest.fail(
            "the 2-node Slurm in network namespaces is not up (sinfo: "
            + (out.stdout.strip() or out.stderr.strip() or "no output")
            + "); start it with: sudo scripts/slurm-up.sh"
        )
    return env


def on_pair(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return helpers.gpulane(*args, cwd=REPO, timeout=180, env=env)


SMALL = ("device=cpu", "sizes.max=64", "iters=3", "warmup=1", "launcher.poll_s=0.5")


@pytest.mark.slurm
def test_pairs_across_two_hosts(slurm_pair: dict[str, str], tmp_path: Path) -> None:
    # One pair (n1+n2): a job of 2 nodes, one rank each, meeting across the bridge.
    res = on_pair(
        slurm_pair,
        "sweep",
        "launcher=slurm",
        "campaign.pattern=pairs",  # the campaign key in its own place
        *SMALL,
        f"results_dir={tmp_path}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    group = next(tmp_path.iterdir())
    summary = json.loads((group / "summary.json").read_text())
    assert summary["nodes"] == ["n1", "n2"] and summary["passed"]
    run = group / "n1+n2"
    rows = [x.to_dict() for x in read_rows(run / "rows.jsonl")]
    assert [r["size_bytes"] for r in rows] == [8, 16, 32, 64]
    for r in rows:
        assert r["status"] == "ok" and r["wrong"] == 0
        assert r["nodes"] == 2 and r["world_size"] == 2 and r["path"] == "NET"
        assert r["extra"]["hosts"] == ["n1", "n2"]
    # Rank 1 on n2 reached rank 0 through n1's address on the bridge.
    (rendezvous,) = (run / ".rendezvous").iterdir()
    assert rendezvous.read_text().split()[0] == "n1"
    assert sorted(p.name for p in (run / "topology").glob("*.json")) == ["n1.json", "n2.json"]


@pytest.mark.slurm
def test_per_node_on_two_hosts(slurm_pair: dict[str, str], tmp_path: Path) -> None:
    # Both nodes side by side, each job pinned to its node. CPU timings of 64 B are noise:
    # the outlier limit is set out of reach here (the rule is tested above on rows).
    res = on_pair(
        slurm_pair,
        "sweep",
        "launcher=slurm",
        "launcher.pattern=per-node",
        "launcher.tasks_per_node=2",
        "launcher.outlier_fraction=0.99",
        *SMALL,
        f"results_dir={tmp_path}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    group = next(tmp_path.iterdir())
    summary = json.loads((group / "summary.json").read_text())
    assert [e["label"] for e in summary["elements"]] == ["n1", "n2"]
    assert len({e["job_id"] for e in summary["elements"]}) == 2
    for node in ("n1", "n2"):
        rows = [x.to_dict() for x in read_rows(group / node / "rows.jsonl")]
        assert rows and all(r["host"] == node and r["world_size"] == 2 for r in rows)
        assert JobRecord.load(group / node).state == "COMPLETED"
    assert "# no outlier among 2 nodes" in res.stdout
