"""What every run command does around its measurements: a unique run directory, the
resolved configuration saved beside the rows, the environment for the ranks, error rows,
and the Parquet copy at the end (also after a failure or an interrupt)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gpulane.errors import InputError
from gpulane.launch.env import hostname
from gpulane.launch.worker import CONFIG_FILE
from gpulane.record import ROWS_JSONL, Row, RowWriter, new_run_id, read_rows, write_parquet


@dataclass
class RunDir:
    run_id: str
    path: Path
    build: str

    @property
    def rows_path(self) -> Path:
        return self.path / ROWS_JSONL

    def rows(self) -> list[dict[str, Any]]:
        return list(read_rows(self.rows_path)) if self.rows_path.exists() else []

    def write_error(self, row: Row) -> None:
        with RowWriter(self.path) as w:
            w.write(row)

    def finish(self) -> Path | None:
        return write_parquet(self.path)


def build_label(cfg: Any) -> str:
    if cfg.get("build"):
        return str(cfg.build)
    preset = cfg.get("preset")
    if preset is not None and preset.get("name") not in (None, "none"):
        return str(preset.name)
    return hostname()


def run_env(cfg: Any) -> dict[str, str]:
    """Preset variables, then the user's env.* on top; values as strings."""
    env: dict[str, str] = {}
    preset = cfg.get("preset")
    if preset is not None and preset.get("env"):
        env.update({str(k): str(v) for k, v in preset.env.items()})
    if cfg.get("env"):
        env.update({str(k): str(v) for k, v in cfg.env.items()})
    for key in env:
        if not key.replace("_", "").isalnum():
            raise InputError(f"env: {key!r} is not a valid environment variable name")
    return env


def make_run_dir(cfg: Any, run_id: str | None = None) -> RunDir:
    build = build_label(cfg)
    run_id = run_id or new_run_id(build)
    root = Path(str(cfg.get("results_dir") or "runs"))
    path = root / run_id
    try:
        path.mkdir(parents=True, exist_ok=run_id is not None)
        probe = path / ".writable"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise InputError(
            f"results_dir: cannot write run directory {path}: {err.strerror or err}; "
            "choose another with results_dir=PATH"
        ) from err
    return RunDir(run_id, path, build)


def save_config(cfg: DictConfig, run: RunDir, **extra: Any) -> DictConfig:
    """The resolved configuration with the run's facts, as every rank will read it."""
    data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    data.update(run_id=run.run_id, build=run.build, **extra)
    saved = OmegaConf.create(data)
    # One temporary file per process: under an outer mpirun/srun every rank saves.
    tmp = run.path / f"{CONFIG_FILE}.{os.getpid()}.tmp"
    OmegaConf.save(saved, tmp)
    os.replace(tmp, run.path / CONFIG_FILE)
    return saved


class Terminated(Exception):
    """SIGTERM (Slurm pre-emption, a kill): handled like Ctrl-C, exit status 143."""


@contextmanager
def sigterm_as_exception() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
