"""What accept checks against: the topology (auto, a file, live) and the baseline
(a run directory or a stored name), and storing a run as a baseline."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from gpulane.analysis.store import (
    BASELINES_DIR,
    TOPOLOGY_FILE,
    find_topology,
    load_frame,
    load_topology,
)
from gpulane.campaigns.accept.suite import probe_live_topology
from gpulane.errors import InputError
from gpulane.parquet_rows import write_parquet
from gpulane.record import RowWriter
from gpulane.rundir import RunDir
from gpulane.topology.model import Topology


def resolve_topology(value: Any, paths: list[Path]) -> tuple[Topology | None, str | None]:
    """The topology for topology=VALUE (auto, a file, live, none) and where it came from."""
    text = "auto" if value is None else str(value)
    if text in ("none", "null", "false", "off"):
        return None, None
    if text == "auto":
        found = find_topology(paths)
        return (_read(found), str(found)) if found else (None, None)
    if text == "live":
        live = probe_live_topology()
        if live is None:
            raise InputError(
                "topology=live: the live probe (gpulane.topology.live, NVML) is not available here"
            )
        return live, "live probe"
    return _read(Path(text)), text


# What an nccl-tests log shows in its first lines (as gpulane parse tells the formats apart)
NCCL_TESTS_SIGN = re.compile(r"# nThread \d+ nGpus|algbw +busbw|Avg bus bandwidth")


def refuse_a_log(target: Path, results_dir: Any) -> None:
    """``run=<an nccl-tests log>``: rows are what accept checks; the log is parsed first."""
    if not target.is_file() or target.suffix in (".jsonl", ".parquet"):
        return
    try:
        with open(target, "rb") as fh:
            head = fh.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return
    if NCCL_TESTS_SIGN.search(head):
        out = Path(str(results_dir or "runs")) / target.stem
        raise InputError(
            f"run: {target} is an nccl-tests log, not rows; parse it first: "
            f"gpulane parse nccl-tests {target} --out {out}, then gpulane accept run={out}"
        )


def _read(path: Path) -> Topology:
    return load_topology(path)


def baselines_dir(results_dir: str | None, run: Any) -> Path:
    """Where named baselines live: ``<results_dir>/baselines``, as an absolute path.

    ``results_dir`` as given (``results_dir=``); when it is left at its default (``runs``)
    and the rows come from ``run=DIR``, the results directory is the one that holds DIR
    (the nearest directory above DIR with a ``baselines/`` in it, else DIR's parent), so
    that checking old rows from another directory does not start a second ``runs/``.
    """
    given = str(results_dir or "runs")
    if given != "runs" or not run:
        return (Path(given) / BASELINES_DIR).resolve()
    target = Path(str(run)).resolve()
    start = target.parent if target.is_dir() else target.parent.parent
    for d in (start, *start.parents):
        if (d / BASELINES_DIR).is_dir():
            return d / BASELINES_DIR
    return start / BASELINES_DIR


def stored_baselines(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.endswith(".tmp"))


def resolve_baseline(value: Any, root: Path) -> tuple[pd.DataFrame | None, str | None]:
    """(rows, where from) for baseline=VALUE: a run directory or rows file, or a name under
    ``root`` (see :func:`baselines_dir`). A baseline that does not exist is bad input
    naming the ones that do: it is never created by asking for it (save_baseline=NAME)."""
    if value is None or str(value) == "":
        return None, None
    text = str(value)
    named = root / text
    if "/" not in text and named.is_dir():
        return load_frame([named]), str(named)
    p = Path(text)
    if p.exists():
        return load_frame([p]), str(p)
    there = stored_baselines(root)
    listed = ", ".join(there) if there else "none yet; store one with save_baseline=NAME"
    raise InputError(
        f"baseline: {text!r} is neither a run directory nor a stored baseline in {root} "
        f"(stored: {listed})"
    )


def store_baseline(
    frame_dirs: list[Path], topology: Topology | None, dest: Path, meta: dict[str, Any]
) -> Path:
    """Copy the rows (and topology) of a run into ``dest`` as a baseline."""
    tmp = dest.with_name(dest.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    with RowWriter(tmp) as w:
        for d in frame_dirs:
            run = RunDir.at(d)
            if run.rows_path.exists():
                from gpulane.record import read_rows

                for row in read_rows(run.rows_path):
                    w.write(row)
            elif run.parquet_path.exists():
                from gpulane.parquet_rows import read_parquet
                from gpulane.record import frame_rows

                for row in frame_rows(read_parquet(run.parquet_path)):
                    w.write(row)
    write_parquet(tmp)
    if topology is not None:
        (tmp / TOPOLOGY_FILE).write_text(json.dumps(topology.to_json(), indent=1), encoding="utf-8")
    (tmp / "baseline.json").write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return dest
