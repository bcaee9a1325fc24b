"""What every run command does around its measurements: a unique run directory, the
resolved configuration saved beside the rows, the environment for the ranks, error rows,
and the Parquet copy at the end (also after a failure or an interrupt)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gpulane.errors import InputError
from gpulane.launch.env import hostname
from gpulane.record import (
    CONFIG_FILE,
    ROWS_JSONL,
    Row,
    RowWriter,
    new_run_id,
    read_rows,
    write_parquet,
)


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
        try:
            with RowWriter(self.path) as w:
                w.write(row)
        except OSError as err:  # a full disk must not hide the run's own error
            _warn(f"could not write the error row to {self.rows_path}: {err.strerror or err}")

    def finish(self) -> Path | None:
        try:
            return write_parquet(self.path)
        except OSError as err:
            (self.path / "rows.parquet.tmp").unlink(missing_ok=True)
            _warn(f"could not write rows.parquet in {self.path}: {err.strerror or err}")
            return None


def _warn(message: str) -> None:
    sys.stderr.write(f"gpulane: warning: {message}\n")


# Less free space than this where the run directory goes stops a run before it starts:
# rows, rank logs, the configuration and the Parquet copy of a sweep fit well within it.
MIN_FREE_BYTES = 8 << 20


def disk_note(path: Path) -> str:
    """'; the filesystem ... is full' when ``path``'s filesystem is (nearly) full, else ''."""
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return ""
    if free >= MIN_FREE_BYTES:
        return ""
    return f"; the filesystem of {path} is full ({free >> 10} KiB free)"


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
        free = shutil.disk_usage(path).free
    except OSError as err:
        raise InputError(
            f"results_dir: cannot write run directory {path}: {err.strerror or err}; "
            "choose another with results_dir=PATH"
        ) from err
    if free < MIN_FREE_BYTES:
        with contextlib.suppress(OSError):
            path.rmdir()
        raise InputError(
            f"results_dir: the filesystem of {root} is full ({free >> 10} KiB free, a run "
            f"needs {MIN_FREE_BYTES >> 20} MiB); free some space or choose another with "
            "results_dir=PATH"
        )
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


class Terminated(BaseException):
    """SIGTERM (Slurm pre-emption, a kill): handled like Ctrl-C, exit status 143.

    A BaseException, as KeyboardInterrupt is: libraries' ``except Exception`` (submitit's
    sacct poll, for one) must not swallow it."""


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
