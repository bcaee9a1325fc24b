"""A campaign's findings as acceptance checks, and the launcher group handed to the sweep."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from gpulane.campaigns.accept.campaign_checks import campaign_checks
from gpulane.campaigns.accept.suite import hydra_value, launcher_overrides
from gpulane.campaigns.elements import Element, new_element
from gpulane.campaigns.settings import PatternSettings
from gpulane.campaigns.summary import summarize, write_summary
from gpulane.config.launcher import LocalLauncherConfig, SlurmLauncherConfig
from gpulane.errors import InputError
from gpulane.launch.slurm.settings import campaign_pattern
from gpulane.record import RowWriter
from gpulane.rundir import RunDir
from tests.launch.test_slurm_patterns import bus_row


def step(tmp_path: Path, pattern: str, subsets: list[list[str]], slow: str) -> Path:
    """A campaign step whose jobs wrote rows (40 GB/s with the slow node, else 100)."""
    group = RunDir("g", tmp_path / pattern, "b")
    group.path.mkdir()
    elements: list[Element] = []
    for nodes in subsets:
        e = new_element(group, "+".join(nodes), nodes)
        with RowWriter(e.run.path) as w:
            w.write(bus_row(e.run.run_id, nodes[0], 40.0 if slow in nodes else 100.0))
        e.state = "COMPLETED"
        elements.append(e)
    nodes = sorted({n for s in subsets for n in s})
    ps = PatternSettings(nodes, 0.1, None, False)
    _, data = summarize(group.path, pattern, elements, ps, {"n4": "down* (Not responding)"})
    data["nodes"] = nodes
    write_summary(group.path, data)
    return group.path


def test_pairs_findings_name_pairs_node_and_lost(tmp_path: Path) -> None:
    nodes = ["n1", "n2", "n3", "n4"]
    group = step(tmp_path, "pairs", [list(p) for p in itertools.combinations(nodes, 2)], "n2")
    checks = campaign_checks(tmp_path)
    assert all(c.rule == "campaign" and c.status == "fail" for c in checks)
    by = {(c.basis, c.subject): c.message for c in checks}
    assert by[("pairs outlier", "n1+n2")].startswith("all_reduce float 64 B: 40 GB/s is 60.0%")
    assert by[("pairs node", "n2")] == (
        "all 3 of its pairs are slow or failed: n1+n2 40 GB/s, n2+n3 40 GB/s, n2+n4 40 GB/s "
        "(the pairs without it: median 100 GB/s)"
    )
    assert by[("pairs lost", "n4")].startswith("lost during the campaign: down*")
    assert (group / "fabric.json").exists()


def test_clean_step_is_one_pass_line(tmp_path: Path) -> None:
    group = RunDir("g", tmp_path / "per-node", "b")
    group.path.mkdir()
    elements = []
    for node in ("n1", "n2", "n3"):
        e = new_element(group, node, [node])
        with RowWriter(e.run.path) as w:
            w.write(bus_row(e.run.run_id, node, 100.0))
        e.state = "COMPLETED"
        elements.append(e)
    _, data = summarize(group.path, "per-node", elements, PatternSettings(["n1"], 0.1, None, False))
    data["nodes"] = ["n1", "n2", "n3"]
    write_summary(group.path, data)
    (check,) = campaign_checks(tmp_path)
    assert (
        check.status == "pass" and check.message == "per-node over 3 node(s), 3 job(s): none named"
    )


def test_pattern_steps() -> None:
    assert campaign_pattern(None) == "allocation"
    assert campaign_pattern("per_node+allocation") == "per-node+allocation"
    assert campaign_pattern(["per-node", "ring", "halving"]) == "per-node+ring+halving"
    with pytest.raises(InputError, match=r"launcher\.pattern: expected one of"):
        campaign_pattern("per-node+triangles")


def test_launcher_overrides_read_back_by_hydra() -> None:
    assert launcher_overrides(LocalLauncherConfig()) == []
    cfg = SlurmLauncherConfig(
        pattern="pairs",
        nodelist="c[1-8]",
        sbatch_args={"chdir": "/a b", "exclusive": True},
        setup=["module load x"],
        halving_good=12.5,
    )
    overrides = launcher_overrides(cfg)
    assert overrides[0] == "launcher=slurm"
    parsed = {
        o.get_key_element(): o.value() for o in OverridesParser.create().parse_overrides(overrides)
    }
    assert parsed["launcher.nodelist"] == "c[1-8]" and parsed["launcher.pattern"] == "pairs"
    assert parsed["launcher.sbatch_args"] == {"chdir": "/a b", "exclusive": True}
    assert parsed["launcher.setup"] == ["module load x"] and parsed["launcher.halving_good"] == 12.5
    assert parsed["launcher.container.image"] is None and parsed["launcher.wait"] is True
    assert hydra_value("it's") == "'it\\'s'" and hydra_value("null") == "'null'"
