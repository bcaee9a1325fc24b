"""The run directory and the files in it: a unique directory per run, the resolved
configuration saved beside the rows, the environment for the ranks, error rows, the
Parquet copy at the end, and the heartbeats through which ranks show their progress to
whatever watches them (any launcher's watchdog)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from omegaconf import OmegaConf

from gpulane.errors import InputError
from gpulane.parquet_rows import write_parquet
from gpulane.record import (
    GPULANE_SET_ENV,
    ROWS_JSONL,
    ROWS_PARQUET,
    Row,
    RowWriter,
    facts_file,
    new_run_id,
    parquet_file,
    read_all_rows,
    rows_file,
)

CONFIG_FILE = "config.yaml"  # the resolved configuration every rank reads
PLAN_FILE = "sweep-plan.json"  # the sweep's plan, worked out once by the session for the ranks
LOG_DIR = "logs"  # rank-N.log: each rank's own output
HEARTBEAT_DIR = ".heartbeat"  # rank-N, alive-N, error-N: progress, liveness, rank errors


@dataclass
class RunDir:
    run_id: str
    path: Path
    build: str

    @classmethod
    def at(cls, path: str | os.PathLike[str]) -> RunDir:
        """A run directory that exists already (read back, resumed): its name is its id."""
        p = Path(path)
        return cls(p.name, p, "")

    @property
    def rows_path(self) -> Path:
        return rows_file(self.path)

    @property
    def parquet_path(self) -> Path:
        return parquet_file(self.path)

    @property
    def facts_path(self) -> Path:
        """The facts its rows share, stored once (imported runs; gpulane.runfacts)."""
        return facts_file(self.path)

    def rows(self) -> list[Row]:
        """Its rows read back (joined with their run's facts), as :class:`Row`."""
        return read_all_rows(self.rows_path) if self.rows_path.exists() else []

    def save_plan(self, plan: dict[str, Any]) -> None:
        """The plan the session worked out, where every rank reads it (``read_plan``)."""
        tmp = self.path / f"{PLAN_FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(plan, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path / PLAN_FILE)

    def read_plan(self) -> dict[str, Any]:
        """The plan ``save_plan`` left; InputError when there is none (a run directory
        that no session prepared)."""
        try:
            data: dict[str, Any] = json.loads((self.path / PLAN_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(
                f"{self.path}: no {PLAN_FILE}; the ranks of a sweep are started by its session"
            ) from None
        return data

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
            self.parquet_path.with_suffix(".parquet.tmp").unlink(missing_ok=True)
            _warn(f"could not write rows.parquet in {self.path}: {err.strerror or err}")
            return None


def rows_files_under(path: str | os.PathLike[str]) -> list[Path]:
    """The rows files of every run directory at or under ``path`` (or ``path`` itself,
    a rows file)."""
    p = Path(path)
    return sorted(p.rglob(ROWS_JSONL)) if p.is_dir() else [p]


def run_dirs_with_rows(path: str | os.PathLike[str]) -> set[Path]:
    """The run directories at or under ``path``: those holding rows (JSON Lines or the
    Parquet copy)."""
    p = Path(path)
    return {f.parent for name in (ROWS_JSONL, ROWS_PARQUET) for f in p.rglob(name)}


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


class CommonConfig(Protocol):
    """What a run directory needs of a command's configuration (config.common's
    CommonConfig has it). Named here, not imported: the configuration is read on the
    floor above, and knows the run directory's files, not the other way round."""

    build: str | None
    results_dir: str
    env: dict[str, str]


class PresetConfig(Protocol):
    """A preset's name and variables (config.common's PresetConfig)."""

    name: str
    env: dict[str, str]


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")


def build_label(cfg: CommonConfig) -> str:
    if cfg.build:
        return str(cfg.build)
    preset: PresetConfig | None = getattr(cfg, "preset", None)
    if preset is not None and preset.name not in (None, "none"):
        return str(preset.name)
    return socket.gethostname().split(".")[0]


def run_env(cfg: CommonConfig) -> dict[str, str]:
    """Preset variables, then the user's env.* on top; values as strings."""
    env: dict[str, str] = {}
    preset: PresetConfig | None = getattr(cfg, "preset", None)
    if preset is not None and preset.env:
        env.update({str(k): str(v) for k, v in preset.env.items()})
    env.update({str(k): str(v) for k, v in (cfg.env or {}).items()})
    for key in env:
        if not key.replace("_", "").isalnum():
            raise InputError(f"env: {key!r} is not a valid environment variable name")
    return env


# -- NCCL's own account of a run: its INFO lines at communicator init, one file per rank --
NCCL_LOG_DIR = "nccl"  # <run_dir>/nccl/nccl-HOST-PID.log
# Only what the transport needs: INIT holds the connections ("via P2P/CUMEM"), channel
# counts and the version; GRAPH the rings and search results (NCCL 2.28's names, src/debug.cc).
NCCL_CAPTURE_SUBSYS = "INIT,GRAPH"


def nccl_capture_env(run_path: Path, env: dict[str, str]) -> dict[str, str]:
    """The variables that make NCCL write its init lines into ``run_path/nccl/`` (one file per
    process, ``%h``/``%p`` expanded by NCCL), on top of ``env`` (the user's ``env.*``).

    A user who set NCCL_DEBUG (in ``env.*`` or their shell) keeps their own logging: then
    nothing is set, and the ranks read what they can (NCCL_DEBUG_FILE, rank logs)."""
    given = {**os.environ, **env}
    if given.get("NCCL_DEBUG"):
        return {}
    out = {"NCCL_DEBUG": "INFO"}
    if not given.get("NCCL_DEBUG_SUBSYS"):
        out["NCCL_DEBUG_SUBSYS"] = NCCL_CAPTURE_SUBSYS
    if not given.get("NCCL_DEBUG_FILE"):
        logs = run_path.resolve() / NCCL_LOG_DIR
        # NCCL falls back to stdout when it cannot open the file: make the folder now.
        logs.mkdir(parents=True, exist_ok=True)
        # NCCL expands %h and %p and reads %% as %: a % of the path itself is doubled.
        out["NCCL_DEBUG_FILE"] = str(logs).replace("%", "%%") + "/nccl-%h-%p.log"
    # The rows' `env` (record.shaping_env) leaves these out: the user did not choose them.
    out[GPULANE_SET_ENV] = ",".join(sorted(out))
    return out


def rank_env(run_path: Path, env: dict[str, str], nccl: bool = True) -> dict[str, str]:
    """The environment given to a run's ranks: ``env`` and, when they may use NCCL, the
    capture of NCCL's init lines (:func:`nccl_capture_env`)."""
    return {**env, **nccl_capture_env(run_path, env)} if nccl else dict(env)


def make_run_dir(cfg: CommonConfig, run_id: str | None = None) -> RunDir:
    """A new run directory under results_dir, checked writable with room for a run, named
    by ``run_id=NAME`` when the configuration gives one (it must not exist yet), else by a
    new id. With ``run_id`` (every rank of an outer launcher derives the same one) the directory may
    exist already: each rank creates it or finds it, and checks it on its own, so that no
    rank depends on another having got there first."""
    build = build_label(cfg)
    shared = run_id is not None  # every rank of an outer launch makes or finds it
    given = getattr(cfg, "run_id", None)  # run_id=NAME: the user's name for the directory
    run_id = str(given) if given else (run_id or new_run_id(build))
    root = Path(str(cfg.results_dir or "runs"))
    path = root / run_id
    if given and not shared and (path.exists() or path.is_symlink()):
        # Never write into (or over) a run that is already there.
        raise InputError(
            f"run_id={run_id}: {path} exists already; choose another run_id, or leave "
            "run_id out for a new name"
        )
    try:
        path.mkdir(parents=True, exist_ok=shared)
        # A probe of this process's own: ranks sharing the directory must not remove
        # each other's (that was a race under the user's own mpirun).
        probe = path / f".writable.{socket.gethostname()}.{os.getpid()}"
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


def discard_unused(run: RunDir) -> bool:
    """Remove a run directory that bad input stopped before anything ran in it: nothing in
    it but its configuration and plan (and empty folders made for the ranks); True when removed. A
    directory holding anything more (rows, a rank's log) is kept."""
    try:
        inputs = (run.path / CONFIG_FILE, run.path / PLAN_FILE)
        written = [f for f in run.path.rglob("*") if not f.is_dir() and f not in inputs]
    except OSError:
        return False
    if written:
        return False
    shutil.rmtree(run.path, ignore_errors=True)
    return not run.path.exists()


@contextlib.contextmanager
def discarded_on_bad_input(run: RunDir) -> Iterator[RunDir]:
    """Inside: the steps between making a run directory and starting its ranks. Bad input
    found there removes the directory again (it would be an empty run in results)."""
    try:
        yield run
    except InputError:
        discard_unused(run)
        raise


def save_config(cfg: C, run: RunDir, **facts: Any) -> C:
    """The configuration with the run's facts (run id, build, world size, ...), saved where
    every rank reads it; the same typed object is returned."""
    saved = dataclasses.replace(cfg, run_id=run.run_id, build=run.build, **facts)
    # One temporary file per process: under an outer mpirun/srun every rank saves.
    tmp = run.path / f"{CONFIG_FILE}.{os.getpid()}.tmp"
    OmegaConf.save(OmegaConf.structured(saved), tmp)
    os.replace(tmp, run.path / CONFIG_FILE)
    return saved


# -- heartbeats: how ranks show progress, written by the ranks, read by watchdogs ---------


def alive_path(run_dir: Path, rank: int) -> Path:
    """The file a rank touches every second while its process runs."""
    return run_dir / HEARTBEAT_DIR / f"alive-{rank}"


def silent_ranks(run_dir: Path, ranks: list[int], older_than_s: float) -> list[int]:
    """Ranks whose alive beat is older than ``older_than_s`` (or that have none)."""
    now = time.time()
    out = []
    for r in ranks:
        try:
            age = now - alive_path(run_dir, r).stat().st_mtime
        except OSError:
            continue  # launched by something that does not beat: no verdict
        if age > older_than_s:
            out.append(r)
    return out


@dataclass(frozen=True)
class Heartbeat:
    rank: int
    index: int
    label: str
    host: str
    pid: int
    at: float
    allow_s: float = 0.0


def write_heartbeat(
    run_dir: Path, rank: int, index: int, label: str, host: str, allow_s: float = 0.0
) -> None:
    d = run_dir / HEARTBEAT_DIR
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".rank-{rank}.tmp"
    tmp.write_text(f"{index}\t{time.time():.3f}\t{os.getpid()}\t{host}\t{allow_s:.1f}\t{label}\n")
    os.replace(tmp, d / f"rank-{rank}")


def write_rank_error(run_dir: Path, rank: int, exit_code: int, message: str) -> None:
    """A rank's own account of a user-facing error, so the launcher can show it as is."""
    d = run_dir / HEARTBEAT_DIR
    d.mkdir(parents=True, exist_ok=True)
    (d / f"error-{rank}").write_text(json.dumps({"exit_code": exit_code, "message": message}))


def read_rank_errors(run_dir: Path) -> dict[int, tuple[int, str]]:
    out: dict[int, tuple[int, str]] = {}
    for f in (run_dir / HEARTBEAT_DIR).glob("error-*"):
        try:
            data = json.loads(f.read_text())
            out[int(f.name.split("-", 1)[1])] = (int(data["exit_code"]), str(data["message"]))
        except (OSError, ValueError, KeyError):
            continue
    return out


def read_heartbeats(run_dir: Path) -> dict[int, Heartbeat]:
    out: dict[int, Heartbeat] = {}
    d = run_dir / HEARTBEAT_DIR
    if not d.is_dir():
        return out
    for f in d.glob("rank-*"):
        try:
            index, at, pid, host, allow, label = f.read_text().rstrip("\n").split("\t", 5)
            rank = int(f.name.split("-", 1)[1])
            out[rank] = Heartbeat(rank, int(index), label, host, int(pid), float(at), float(allow))
        except (OSError, ValueError):
            continue
    return out


NOTES_FILE = "notes"  # lines ranks leave for the user ("# mpi: ...")


def write_note(run_dir: Path, text: str) -> None:
    """A line for the user from a rank, shown by the session above any launcher."""
    d = run_dir / HEARTBEAT_DIR
    d.mkdir(parents=True, exist_ok=True)
    with open(d / NOTES_FILE, "a", encoding="utf-8") as fh:
        fh.write(text.rstrip("\n") + "\n")


class NoteTail:
    """The notes ranks wrote since the last call."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / HEARTBEAT_DIR / NOTES_FILE
        self.offset = 0

    def read(self) -> list[str]:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        complete = data[: data.rfind("\n") + 1]
        self.offset += len(complete.encode())
        return complete.splitlines()
