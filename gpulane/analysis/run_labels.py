"""Labels that tell runs apart: the configuration values in which they differ.

A multirun (``gpulane sweep -m dtype=float,half``) makes runs of one build; their run ids
(``20261202-011235-vm-d3ba24d5``) are cut in a table's columns and say nothing of what
was swept. The runs' own saved configurations (``config.yaml`` in each run directory)
say it: the keys whose values differ between them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from gpulane.rundir import CONFIG_FILE

# keys that differ between any two runs and say nothing of what was asked
PER_RUN_KEYS = frozenset({"run_id", "results_dir", "resume"})


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = ",".join(str(v) for v in value)
        else:
            out[name] = str(value)
    return out


def _config_of(run_dir: Path) -> dict[str, str] | None:
    try:
        loaded = yaml.safe_load((run_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return _flat(loaded) if isinstance(loaded, Mapping) else None


def _short(key: str) -> str:
    """``sizes.max`` stays as is; ``backend.name`` reads ``backend``, as ``-m
    backend=...`` said it."""
    head, _, tail = key.rpartition(".")
    return head if head and tail == "name" else key


def swept_labels(run_dirs: Sequence[Path], builds: Sequence[str]) -> list[str]:
    """One label per run: its build when the builds tell the runs apart, else the
    values that differ (``dtype=half``, ``sizes.max=1M,dtype=half``), else the run
    directories' names (no saved configuration, or none differs)."""
    if all(builds) and len(set(builds)) == len(builds):
        return list(builds)
    names = [d.name for d in run_dirs]
    configs = [_config_of(d) for d in run_dirs]
    if any(c is None for c in configs):
        return names
    known = [c for c in configs if c is not None]
    keys = sorted({k for c in known for k in c} - PER_RUN_KEYS)
    differ = [k for k in keys if len({c.get(k) for c in known}) > 1]
    if not differ:
        return names
    labels = [",".join(f"{_short(k)}={c.get(k, '-')}" for k in differ) for c in known]
    return labels if len(set(labels)) == len(labels) else names
