"""`gpulane accept`'s localization: when it runs, what it names, and the evidence beside it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from gpulane.analysis.rules import FAIL, PASS, SKIP, Check
from gpulane.campaigns.accept.localize import failed_collective, localize_checks, verdict_lines
from gpulane.topology.model import Topology
from tests.helpers import gpulane

FOUR = Topology.from_json(
    {
        "gpus": [{"name": f"GPU{i}", "index": i} for i in range(4)],
        "pairs": [
            {"a": f"GPU{a}", "b": f"GPU{b}", "label": "NV18", "kind": "nvlink", "nvlinks": 18}
            for a in range(4)
            for b in range(a + 1, 4)
        ],
    }
)
FAILED = Check(
    "all_reduce_busbw_nvlink",
    FAIL,
    "expected",
    "vm",
    "busbw 166 GB/s",
    figure="all_reduce float 1 GiB busbw",
    margin=-0.42,
)


def found(gpus=(), pairs=(), pattern="pairs") -> dict:
    steps = [
        {"subset": [f"GPU{i}" for i in range(4)], "figure_gbps": 166.0},
        {"subset": ["GPU0", "GPU1"], "figure_gbps": 350.0},
        {"subset": ["GPU2", "GPU3"], "figure_gbps": 180.0},
        {"subset": ["GPU0", "GPU2"], "figure_gbps": 175.0},
    ]
    return {
        "op": "all_reduce",
        "results": [
            {
                "pattern": pattern,
                "units": [f"GPU{i}" for i in range(4)],
                "gpus": list(gpus),
                "pairs": [list(p) for p in pairs],
                "sets": [],
                "reference_gbps": 350.0,
                "steps": steps,
                "note": "",
            }
        ],
    }


STATES = {
    "GPU2": "GPU2 runs pid 1967 (python3, 100 %, 1.9 GiB) and its clocks are held at its "
    "power cap (695 W of 700 W, 62 C)"
}
DOCTOR = [
    {
        "severity": "warning",
        "check": "clocks",
        "title": "GPU2: clocks held down (SW Power Cap)",
        "subject": "GPU2",
    },
    {
        "severity": "error",
        "check": "foreign",
        "title": "GPU2: in use by another process (pid 1967 (python3, 100 %, 1.9 GiB))",
        "subject": "GPU2",
    },
    {
        "severity": "warning",
        "check": "persistence",
        "title": "GPU0: persistence mode off",
        "subject": "GPU0",
    },
]


def test_the_line_names_the_gpu_its_figures_and_its_cause() -> None:
    (line,) = verdict_lines(found(gpus=["GPU2"]), FAILED, FOUR, STATES, DOCTOR)
    assert line.status == FAIL and line.subject == "GPU2" and line.rule == "localize"
    assert line.message == (
        "all_reduce float 1 GiB busbw -42% on vm; localized to GPU2 (pairs: all_reduce with "
        "GPU2: 175 GB/s, without: 350 GB/s); GPU2 runs pid 1967 (python3, 100 %, 1.9 GiB) and "
        "its clocks are held at its power cap (695 W of 700 W, 62 C)"
    )


def test_a_pair_carries_its_path_label_and_both_gpus_evidence() -> None:
    (line,) = verdict_lines(found(pairs=[("GPU0", "GPU2")]), FAILED, FOUR, {}, DOCTOR)
    assert line.subject == "GPU0-GPU2"
    assert "localized to pair GPU0-GPU2 (NV18)" in line.message
    assert "doctor [warning] GPU0: persistence mode off" in line.message
    assert "doctor [warning] GPU2: clocks held down" in line.message
    assert "doctor [error] GPU2: in use by another process" in line.message


def test_nothing_named_is_not_a_pass() -> None:
    (line,) = verdict_lines(found(), FAILED, FOUR, {}, [])
    assert line.status == SKIP and "named no GPU or pair" in line.message


def test_only_a_failed_collective_starts_it() -> None:
    ok = Check("all_reduce_busbw_nvlink", PASS, "expected", "vm", "fine")
    copy = Check("pinned_h2d", FAIL, "expected", "GPU0", "slow", figure="h2d pinned 1 GiB")
    assert failed_collective([ok, copy]) is None
    assert failed_collective([ok, copy, FAILED]) is FAILED


def test_auto_on_a_healthy_node_runs_nothing(tmp_path: Path) -> None:
    cfg = SimpleNamespace(
        suite=SimpleNamespace(localize="auto", localize_pattern="pairs"), launcher=None
    )
    ok = Check("all_reduce_busbw_nvlink", PASS, "expected", "vm", "fine")
    assert localize_checks(cfg, tmp_path, "b", [ok], None, [], 4) == ([], None)
    assert not (tmp_path / "localize").exists()


def test_a_suite_over_several_nodes_leaves_the_node_to_its_campaign(tmp_path: Path) -> None:
    """An 8-node campaign's failed check starts no search inside a node (the campaign names
    the node; found by the 8-node Slurm accept test); always says why it did not run."""
    launcher = SimpleNamespace(name="slurm", nodes=8, hostfile=None)
    auto = SimpleNamespace(
        suite=SimpleNamespace(localize="auto", localize_pattern="pairs"), launcher=launcher
    )
    assert localize_checks(auto, tmp_path, "b", [FAILED], None, [], 0) == ([], None)
    always = SimpleNamespace(
        suite=SimpleNamespace(localize="always", localize_pattern="pairs"), launcher=launcher
    )
    (line,), step = localize_checks(always, tmp_path, "b", [FAILED], None, [], 0)
    assert step is None and line.status == SKIP and "runs on one node" in line.message
    assert not (tmp_path / "localize").exists()


def test_accept_localizes_a_slow_rank_on_cpu(tmp_path: Path) -> None:
    """The whole path on real gloo ranks: suite, verdict, localization, accept.json."""
    p = gpulane(
        "accept",
        f"results_dir={tmp_path}",
        "suite.collectives=[all_reduce]",
        "suite.sizes_max=4K",
        "suite.sweep_overrides=['ranks=4','device=cpu','iters=4','warmup=1']",
        "device=cpu",
        "suite.localize=always",
        "suite.localize_pattern=halving",
        "suite.localize_overrides=['slow_rank=2','slow_ms=200','localize_tolerance=0.1']",
        "html=false",
        cwd=tmp_path,
        timeout=400,
    )
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    (accept_json,) = tmp_path.glob("*/accept.json")
    doc = json.loads(accept_json.read_text())
    lines = [c for c in doc["checks"] if c["rule"] == "localize"]
    assert [(c["status"], c["subject"]) for c in lines] == [("fail", "GPU2")], lines
    assert "localized to GPU2 (halving" in lines[0]["message"]
    assert [s["name"] for s in doc["steps"]][-1] == "localize"
    assert "localized to GPU2" in p.stdout


def test_bad_localize_settings_stop_before_anything_is_measured(tmp_path: Path) -> None:
    for key, words in (
        ("suite.localize=sometimes", "suite.localize: expected one of auto, always, never"),
        ("suite.localize_pattern=bisect", "localize pattern: expected one of pairs"),
    ):
        p = gpulane("accept", f"results_dir={tmp_path}", key, cwd=tmp_path)
        assert p.returncode == 2 and words in p.stderr, p.stderr
        assert "Traceback" not in p.stderr and not list(tmp_path.glob("*/rows.jsonl"))


def test_the_localization_runs_like_the_suites_sweep(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from gpulane.campaigns.accept.localize import localize_command

    cfg = OmegaConf.create(
        {
            "timeout_s": 300,
            "env": {"NCCL_DEBUG": "WARN"},
            "preset": {"name": "socket"},
            "launcher": {"name": "local"},
            "suite": {
                "sizes_max": "auto",
                "localize": "auto",
                "localize_pattern": "ring",
                "sweep_overrides": ["iters=50"],
                "localize_overrides": ["warmup=2"],
            },
        }
    )
    cmd = localize_command(cfg, tmp_path, "b", "all_gather", gpus=4)
    assert cmd[3:] == [
        "sweep",
        f"results_dir={tmp_path / 'localize'}",
        "build=b",
        "progress=false",
        "timeout_s=300",
        "collectives=[all_gather]",
        "sizes.min=1G",
        "sizes.max=1G",
        "localize=ring",
        "preset=socket",
        "++env.NCCL_DEBUG=WARN",
        "torch_overhead=false",
        "iters=50",
        "warmup=2",
    ]
    # asked for: the override stands alone
    cfg.suite.localize_overrides = ["torch_overhead=true"]
    cmd = localize_command(cfg, tmp_path, "b", "all_gather", gpus=4)
    assert [c for c in cmd if c.startswith("torch_overhead")] == ["torch_overhead=true"]
