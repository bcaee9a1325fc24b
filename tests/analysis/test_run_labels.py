"""Runs told apart by the configuration values in which they differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpulane.analysis.run_labels import swept_labels


def _run(root: Path, name: str, **config: Any) -> Path:
    base: dict[str, Any] = {
        "run_id": name,
        "results_dir": str(root),
        "build": "vm",
        "dtype": "float",
        "backend": {"name": "torch", "memory": "torch"},
        "sizes": {"min": "8", "max": "64K"},
        "collectives": ["all_reduce"],
    }
    for key, value in config.items():
        if key in ("backend", "sizes"):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    d = root / name
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump(base), encoding="utf-8")
    return d


def test_distinct_builds_are_the_labels(tmp_path: Path) -> None:
    dirs = [_run(tmp_path, "r1"), _run(tmp_path, "r2")]
    assert swept_labels(dirs, ["x16", "riser"]) == ["x16", "riser"]


def test_one_build_reads_what_differs(tmp_path: Path) -> None:
    dirs = [
        _run(tmp_path, "r1", dtype="float"),
        _run(tmp_path, "r2", dtype="half"),
        _run(tmp_path, "r3", dtype="half", sizes={"max": "1M"}),
    ]
    assert swept_labels(dirs, ["vm", "vm", "vm"]) == [
        "dtype=float,sizes.max=64K",
        "dtype=half,sizes.max=64K",
        "dtype=half,sizes.max=1M",
    ]


def test_a_group_name_reads_as_the_group(tmp_path: Path) -> None:
    dirs = [_run(tmp_path, "r1"), _run(tmp_path, "r2", backend={"name": "gloo"})]
    assert swept_labels(dirs, ["vm", "vm"]) == ["backend=torch", "backend=gloo"]
    assert swept_labels(dirs, ["vm", ""]) == ["backend=torch", "backend=gloo"]


def test_nothing_differs_or_no_config_falls_back_to_the_names(tmp_path: Path) -> None:
    same = [_run(tmp_path / "a", "r1"), _run(tmp_path / "a", "r2")]
    assert swept_labels(same, ["vm", "vm"]) == ["r1", "r2"]
    bare = tmp_path / "b" / "r3"
    bare.mkdir(parents=True)
    assert swept_labels([same[0], bare], ["vm", "vm"]) == ["r1", "r3"]
