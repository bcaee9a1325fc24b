"""Remote launchers are plugins: a launcher defined outside the package
(tests/launch/remote_plugin/ssh_like.py and its YAML, found through $GPULANE_PLUGINS)
starts its ranks on OTHER hosts, the network-namespace nodes n1 and n2 that
scripts/slurm-up.sh brings up, each rank by a plain per-host starter (``ip netns exec``).
A sweep, a pairs campaign and ``collect --no-wait`` run through it with nothing in
gpulane/ knowing it: the session, the campaigns and collect reach it only through the
Launcher interface (gpulane/launch/base.py) and the registry.

Marked ``slurm``: the nodes are the Slurm tests' (CI runs these in their serial group)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests import helpers
from tests.helpers import rows_of

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "tests.launch.remote_plugin.ssh_like"
SMALL = ("device=cpu", "sizes.max=64", "iters=3", "warmup=1", "progress=false")
# The first node's address on the bridge (scripts/slurm-lib.sh: node_ip pair 1).
N1_ADDR = "10.77.0.11"


@pytest.fixture(scope="module")
def hosts() -> dict[str, str]:
    """The environment that names the plugin; fails when n1 and n2 are not there."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    names = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    if not {"gpl-n1", "gpl-n2"} <= names:
        pytest.fail(
            f"the namespace nodes n1, n2 are not up (ip netns: {sorted(names)}); "
            "start them with: scripts/slurm-up.sh (as root)"
        )
    return {"GPULANE_PLUGINS": PLUGIN}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return helpers.gpulane(*args, cwd=ROOT, timeout=240, env=env)


def only_dir(root: Path) -> Path:
    (found,) = [p for p in root.iterdir() if p.is_dir()]
    return found


def check_across_hosts(run_dir: Path) -> None:
    """Rows of 2 ranks that ran on n1 and n2, meeting at n1's address."""
    rows = rows_of(run_dir)
    assert [r["size_bytes"] for r in rows] == [8, 16, 32, 64]
    assert all(r["status"] == "ok" and r["wrong"] == 0 and r["world_size"] == 2 for r in rows)
    assert {r["extra"]["launcher"] for r in rows} == {"ssh_like"}
    state = json.loads((run_dir / "ssh_like.json").read_text())
    assert state["rank_hosts"] == {"0": "n1", "1": "n2"}
    assert state["master"].split(":")[0] == N1_ADDR
    preflight = json.loads((run_dir / "preflight.json").read_text())
    assert sorted(f["host"] for f in preflight) == ["n1", "n2"]  # each rank's own host name


def test_a_sweep_on_two_other_hosts(hosts: dict[str, str], tmp_path: Path) -> None:
    res = run(hosts, "sweep", "launcher=ssh_like", *SMALL, f"results_dir={tmp_path}")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 ranks on n1,n2 (ssh_like" in res.stdout
    check_across_hosts(only_dir(tmp_path))


def test_a_pairs_campaign_through_the_plugin(hosts: dict[str, str], tmp_path: Path) -> None:
    # CPU timings of 64 B are noise: the outlier limit is out of reach (one pair anyway).
    res = run(
        hosts,
        "sweep",
        "launcher=ssh_like",
        "campaign.pattern=pairs",
        "campaign.outlier_fraction=0.99",
        *SMALL,
        f"results_dir={tmp_path}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    group = only_dir(tmp_path)
    summary = json.loads((group / "summary.json").read_text())
    assert summary["nodes"] == ["n1", "n2"] and summary["passed"]
    check_across_hosts(group / "n1+n2")


def test_the_plugin_dry_run_starts_nothing(hosts: dict[str, str], tmp_path: Path) -> None:
    res = run(
        hosts, "sweep", "launcher=ssh_like", "campaign.pattern=pairs",
        "campaign.dry_run=true", *SMALL, f"results_dir={tmp_path}",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "n1+n2: ip netns exec gpl-n1 unshare --uts" in res.stdout
    group = only_dir(tmp_path)
    assert not [p for p in group.iterdir() if p.is_dir()]  # no element ran


def test_left_running_then_collected(hosts: dict[str, str], tmp_path: Path) -> None:
    res = run(
        hosts, "sweep", "launcher=ssh_like", "launcher.wait=false", *SMALL,
        f"results_dir={tmp_path}",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = only_dir(tmp_path)
    assert f"collect with: gpulane collect {run_dir}" in res.stdout
    # At once: the ranks are still starting (importing torch takes seconds), so it says
    # how far they are and returns; later, the whole table.
    early = run(hosts, "collect", "--no-wait", str(run_dir))
    assert early.returncode == 0, early.stdout + early.stderr
    assert "ranks running on n1,n2; rows so far in" in early.stdout
    deadline = time.monotonic() + 180
    while len(list((run_dir / ".ssh_like").glob("exit.*"))) < 2:
        assert time.monotonic() < deadline, "the ranks did not end"
        time.sleep(0.5)
    late = run(hosts, "collect", "--no-wait", str(run_dir))
    assert late.returncode == 0, late.stdout + late.stderr
    assert "# Avg bus bandwidth" in late.stdout and "rows so far" not in late.stdout
    check_across_hosts(run_dir)


def test_no_core_file_names_the_plugin() -> None:
    core = [p for p in (ROOT / "gpulane").rglob("*") if p.suffix in (".py", ".yaml", ".toml")]
    assert not [p for p in core if "ssh_like" in p.read_text(encoding="utf-8")]
