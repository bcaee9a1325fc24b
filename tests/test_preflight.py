"""Pre-flight: the world is compared with the configuration before any collective."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulane.errors import InputError
from gpulane.preflight import check_world, rank_facts, world_problems
from gpulane.rank import free_port


def _facts(n: int, **odd: object) -> list[dict[str, object]]:
    facts = [
        rank_facts(r, "node1", {"gpulane": "0.1.0", "torch": "2.13"}, "cpu", None) for r in range(n)
    ]
    for key, value in odd.items():
        facts[-1][key] = value
    return facts


def test_a_healthy_world_passes(tmp_path: Path) -> None:
    check_world(_facts(4), 4, tmp_path)
    assert len(json.loads((tmp_path / "preflight.json").read_text())) == 4


def test_mixed_versions_name_the_rank() -> None:
    (problem,) = world_problems(_facts(4, torch="2.9"), 4)
    assert problem == "torch differs: ranks [3] run 2.9, others 2.13"


def test_missing_rank_and_gpu_count() -> None:
    facts = _facts(3)
    for f in facts:
        f.update(device="cuda:0", gpus_visible=2)
    problems = world_problems(facts, 4)
    assert "3 ranks arrived, the run is configured for 4" in problems
    assert "node1 runs 3 GPU ranks but sees 2 GPUs" in problems


def test_check_world_raises_with_a_table(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        check_world(_facts(2, gpulane="0.0.9"), 2, tmp_path)
    text = str(err.value)
    assert text.startswith("pre-flight: gpulane differs: ranks [1] run 0.0.9")
    assert "rank  host" in text and "0.0.9" in text.splitlines()[-1]


def test_torchrun_style_world_bigger_than_configured(tmp_path: Path) -> None:
    """Three ranks started by an outer launcher (env rendezvous) for a ranks=2 config."""
    port = str(free_port())
    procs = []
    for rank in range(3):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": "3",
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "GPULANE_RUN_ID": "pf-test",
        }
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gpulane",
                    "sweep",
                    "ranks=2",
                    "device=cpu",
                    "sizes.max=64",
                    f"results_dir={tmp_path}",
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 2 for p in procs), outs
    assert "3 ranks arrived, the run is configured for 2" in outs[0][1]
    assert not (tmp_path / "pf-test" / "rows.jsonl").exists()  # nothing was measured
