"""Dry runs submit nothing, for every campaign pattern and under ``-m``: each prints what it
would submit (the launcher's words: sbatch's options) and the real Slurm of
scripts/slurm-up.sh gets no job (neither squeue nor sacct knows one). A conflict between
the ranks asked for and the ranks the launcher starts is refused before submitting."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import helpers
from tests.launch.test_slurm import slurm as slurm  # the fixture, by name

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("device=cpu", "sizes.max=64", "iters=3", "warmup=1", "progress=false")


def gpulane(*args: str) -> subprocess.CompletedProcess[str]:
    return helpers.gpulane(*args, cwd=ROOT, timeout=240)


def job_names() -> list[str]:
    """Every job Slurm knows of: queued or running (squeue), and ended (sacct)."""
    queued = subprocess.run(
        ["squeue", "-h", "-o", "%j"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    ended = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "JobName%300", "-S", "now-1hours"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    return queued + ended


def run_ids(root: Path) -> list[str]:
    """The run directories the command made (a campaign's group, a multirun's runs)."""
    return sorted(p.parent.name for p in root.rglob("plan.json"))


def check_nothing_submitted(root: Path, out: str) -> None:
    ids = run_ids(root)
    assert ids, "no run directory: the dry run wrote no plan"
    names = job_names()
    assert not [n for n in names for i in ids if i in n], f"jobs submitted: {names}"
    assert not list(root.rglob(".submitit")), "hydra-submitit-launcher submitted an array"
    assert "gpulane-None" not in out


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        (None, ["# dry run: one launch of 2 rank(s); nothing submitted"]),
        ("per-node", ["n1: sbatch ", "--nodelist=n1 ", "n2: sbatch "]),
        ("pairs", ["n1+n2: sbatch ", "--nodelist=n1,n2 ", "--nodes=2 "]),
        ("ring", ["n1+n2: sbatch "]),
        ("halving", ["step01-2nodes: sbatch ", "then halves of a slow set"]),
        ("per-node+allocation", ["n1: sbatch ", "all-2nodes: sbatch "]),
    ],
)
def test_a_dry_run_submits_nothing(
    slurm: str, tmp_path: Path, pattern: str | None, words: list[str]
) -> None:
    how = [f"campaign.pattern={pattern}", "campaign.nodelist=[n1,n2]"] if pattern else []
    res = gpulane(
        "sweep", "launcher=slurm", "launcher.tasks_per_node=2", "campaign.dry_run=true",
        *how, *SMALL, f"results_dir={tmp_path}",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    for w in words:
        assert w in res.stdout, res.stdout
    if pattern is None:  # the one job a plain run submits, under its own name
        (group,) = run_ids(tmp_path)
        assert f"--job-name=gpulane-{group} " in res.stdout
        assert "--ntasks-per-node=2 " in res.stdout and "--nodelist" not in res.stdout
    else:
        assert f"# dry run: campaign.pattern={pattern} over 2 node(s); nothing submitted" in (
            res.stdout
        )
    check_nothing_submitted(tmp_path, res.stdout)


def test_the_old_spelling_still_dry_runs(slurm: str, tmp_path: Path) -> None:
    res = gpulane(
        "sweep", "launcher=slurm", "launcher.pattern=pairs", "launcher.nodelist=[n1,n2]",
        "launcher.dry_run=true", *SMALL, f"results_dir={tmp_path}",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "is now" not in res.stdout and "are now campaign.pattern" in res.stdout
    (group,) = run_ids(tmp_path)
    assert f"--job-name=gpulane-{group}.n1+n2 " in res.stdout  # not gpulane-None
    check_nothing_submitted(tmp_path, res.stdout)


@pytest.mark.parametrize("pack", [False, True])
def test_a_multirun_dry_run_submits_nothing(slurm: str, tmp_path: Path, pack: bool) -> None:
    res = gpulane(
        "sweep", "-m", "dtype=float,int32", "launcher=slurm", "campaign.dry_run=true",
        f"campaign.pack={str(pack).lower()}", *SMALL, f"results_dir={tmp_path}",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("# dry run: one launch of 1 rank(s); nothing submitted") == 2
    assert len(run_ids(tmp_path)) == 2
    check_nothing_submitted(tmp_path, res.stdout)


def test_ranks_the_launcher_does_not_start_are_refused_first(slurm: str, tmp_path: Path) -> None:
    res = gpulane(
        "sweep", "launcher=slurm", "launcher.tasks_per_node=2", "ranks=4", *SMALL,
        f"results_dir={tmp_path}",
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [
        "gpulane: error: ranks=4 but launcher=slurm starts 2 rank(s) (1 node(s) x 2); "
        "set ranks=auto or ask the launcher for that many"
    ]
    assert "Traceback" not in res.stderr
    assert not list(tmp_path.iterdir())  # refused before a run directory, let alone a job
    res = gpulane(
        "sweep", "launcher=slurm", "campaign.pattern=pairs", "campaign.nodelist=[n1,n2]",
        "campaign.dry_run=true", "ranks=3", *SMALL, f"results_dir={tmp_path}",
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith("gpulane: error: ranks=3: the runs of campaign.pattern=pairs")
    assert not list(tmp_path.iterdir())
    res = gpulane(  # a pair of nodes with a rank each: 2 ranks, as asked
        "sweep", "launcher=slurm", "campaign.pattern=pairs", "campaign.nodelist=[n1,n2]",
        "campaign.dry_run=true", "ranks=2", *SMALL, f"results_dir={tmp_path}",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["campaign.dry_run=true"], "campaign.dry_run=true: launcher=local starts its ranks"),
        (["campaign.pattern=pairs"], "campaign.pattern=pairs: launcher=local starts its ranks"),
        (
            ["launcher=slurm", "backend=nccl_tests", "campaign.dry_run=true"],
            "campaign.dry_run=true: backend=nccl_tests runs the binaries as one launch",
        ),
    ],
)
def test_a_campaign_key_a_route_cannot_honour_is_refused(
    slurm: str, tmp_path: Path, args: list[str], words: str
) -> None:
    """Not ignored: a dry run that started ranks here, or a pattern that ran one sweep."""
    res = gpulane("sweep", *args, *SMALL, f"results_dir={tmp_path}")
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"gpulane: error: {words}"), line
    assert not list(tmp_path.iterdir())
