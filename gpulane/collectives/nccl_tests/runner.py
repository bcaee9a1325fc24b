"""``gpulane sweep backend=nccl_tests``: drive the user's own nccl-tests build and keep what it
prints as gpulane rows, beside the torch.distributed backend's.

gpulane never downloads or builds nccl-tests. It finds the binaries (``backend.home``, then
``$NCCL_TESTS_HOME``, each also with ``build/``, then ``PATH``), builds one command line per
collective and type from the same sweep configuration as every other backend, runs it
(locally with ``-g N``, or one rank per GPU under mpirun or srun with ``-g 1``), streams its
output to ``nccl-tests-<op>-<type>.log`` in the run directory while printing the table, and
reads the numbers from the ``-J`` JSON where the binary supports it (``-h`` lists ``-J``),
from the text otherwise. Failures (a non-zero exit, "Test NCCL failure", an abort, a hang
past ``timeout_s``, wrong results) become error rows a user can act on.

Rows of one binary are written when it ends (the log is on disk from the first byte, and
``gpulane parse nccl-tests`` reads it again if gpulane itself is killed).
"""

from __future__ import annotations

import contextlib
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.collectives.nccl_tests.args import test_args
from gpulane.collectives.nccl_tests.binaries import (
    find_binaries,
    help_text,
    supports_json,
    supports_per_iter,
)
from gpulane.collectives.nccl_tests.jsonfile import parse_json
from gpulane.collectives.nccl_tests.model import EXIT_STATUS, ErrorEvent, TestRun, shaping_env
from gpulane.collectives.nccl_tests.rows import rows_from_runs
from gpulane.collectives.nccl_tests.text import parse_text
from gpulane.collectives.plan import SweepPlan, as_list, build_plan
from gpulane.collectives.spec import collective
from gpulane.collectives.table import SweepTable, print_run_header
from gpulane.errors import InputError, MissingComponent, ParseError, RunFailed
from gpulane.record import Row, RowWriter
from gpulane.runs import RunDir, Terminated, sigterm_as_exception

KILL_GRACE_S = 5.0


def launch_prefix(cfg: Any, world: int, env: dict[str, str]) -> tuple[list[str], int, str]:
    """(command prefix, GPUs per process, launcher name) for the configured launcher."""
    launcher = str(cfg.launcher.get("name", "local"))
    extra = [
        str(a)
        for key in ("extra_args", "args", "srun_args")
        for a in as_list(cfg.launcher.get(key))
    ]
    if launcher == "local":
        return [], world, launcher
    if launcher == "mpirun":
        exe = str(cfg.launcher.get("command") or "mpirun")
        if shutil.which(exe) is None:
            raise MissingComponent(
                f"launcher=mpirun: {exe} is not on PATH; install Open MPI or set launcher.command"
            )
        prefix = [exe, "-np", str(world)]
        if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-run-as-root" not in extra:
            prefix.append("--allow-run-as-root")
        hostfile = cfg.launcher.get("hostfile")
        if hostfile:
            prefix += ["--hostfile", str(hostfile)]
        hosts = cfg.launcher.get("hosts")
        if hosts:
            prefix += ["--host", ",".join(str(h) for h in as_list(hosts))]
        for key in sorted(env):
            prefix += ["-x", key]
        return prefix + extra, 1, launcher
    if launcher in ("slurm", "srun"):
        exe = str(cfg.launcher.get("command") or "srun")
        if shutil.which(exe) is None:
            raise MissingComponent(
                f"launcher={launcher}: {exe} is not on PATH; run on a Slurm login or batch node"
            )
        prefix = [exe, f"--ntasks={world}"]
        for key, flag in (
            ("nodes", "--nodes"),
            ("gpus_per_node", "--gpus-per-node"),
            ("partition", "--partition"),
            ("account", "--account"),
            ("qos", "--qos"),
            ("time", "--time"),
        ):
            value = cfg.launcher.get(key)
            if value:
                prefix.append(f"{flag}={value}")
        mpi = cfg.launcher.get("mpi")
        if mpi:
            prefix.append(f"--mpi={mpi}")
        return prefix + extra, 1, launcher
    raise InputError(f"launcher: {launcher!r} cannot start nccl-tests; use local, mpirun or slurm")


# ------------------------------------------------------------------------------ running


@dataclass
class Outcome:
    returncode: int | None
    text: str
    timed_out: bool = False
    interrupted: int = 0  # 130 (Ctrl-C) or 143 (SIGTERM)
    lines: list[str] = field(default_factory=list)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)


def stream(
    cmd: list[str],
    env: dict[str, str],
    log: Path,
    timeout_s: float,
    on_line: Any = None,
) -> Outcome:
    """Run ``cmd``, copying its output (stdout and stderr) to ``log`` line by line and to
    ``on_line``; end it when it prints nothing for ``timeout_s`` seconds."""
    lines: queue.Queue[bytes | None] = queue.Queue()
    with open(log, "wb") as fh:
        fh.write(("# gpulane: " + shlex.join(cmd) + "\n").encode())
        fh.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )

        def reader() -> None:
            assert proc.stdout is not None
            for raw in iter(proc.stdout.readline, b""):
                lines.put(raw)
            lines.put(None)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        out = Outcome(None, "")
        last = time.monotonic()
        done = False
        try:
            while not done:
                try:
                    raw = lines.get(timeout=0.2)
                except queue.Empty:
                    if timeout_s > 0 and time.monotonic() - last > timeout_s:
                        out.timed_out = True
                        _kill_group(proc)
                        break
                    continue
                if raw is None:
                    done = True
                    break
                last = time.monotonic()
                fh.write(raw)
                fh.flush()
                text = raw.decode("utf-8", errors="replace")
                out.lines.append(text)
                if on_line is not None:
                    on_line(text)
        except (KeyboardInterrupt, Terminated) as ex:
            out.interrupted = 143 if isinstance(ex, Terminated) else 130
            _kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(KILL_GRACE_S)
        if proc.poll() is None:
            _kill_group(proc)
        thread.join(1.0)
        while True:  # what the reader got after the loop ended
            try:
                raw = lines.get_nowait()
            except queue.Empty:
                break
            if raw is None:
                continue
            fh.write(raw)
            out.lines.append(raw.decode("utf-8", errors="replace"))
        out.returncode = proc.returncode
    out.text = "".join(out.lines)
    return out


def merge_json(text_run: TestRun, json_run: TestRun) -> bool:
    """Give the text run the JSON's full-precision numbers where both list the same sizes."""
    if not json_run.lines or len(json_run.lines) < len(text_run.lines):
        return False
    for t, j in zip(text_run.lines, json_run.lines, strict=False):
        if t.size_bytes != j.size_bytes or t.dtype != j.dtype:
            return False
    for t, j in zip(text_run.lines, json_run.lines, strict=False):
        if len(j.results) >= len(t.results):
            t.results = [
                *j.results[: len(t.results)],
            ]
    text_run.format = "text+json"
    if text_run.header.nccl_library is None:
        text_run.header.nccl_library = json_run.header.nccl_library
    return True


def _tail(text: str, n: int = 3) -> str:
    useful = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return " | ".join(useful[-n:])


def describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    meaning = EXIT_STATUS.get(code)
    return f"exited with status {code}" + (f" ({meaning})" if meaning else "")


@dataclass
class _Live:
    """Table lines printed as nccl-tests prints them (re-reading the log so far)."""

    table: SweepTable
    placements: list[bool]
    common: dict[str, Any]
    op: str
    text: list[str] = field(default_factory=list)
    shown: int = 0

    def __call__(self, line: str) -> None:
        self.text.append(line)
        stripped = line.strip()
        if "NCCL WARN" in stripped or "failure" in stripped.lower():
            self.table.print(f"# nccl-tests: {stripped}")
        if not stripped[:1].isdigit():
            return
        try:
            runs = parse_text("".join(self.text), "<live>")
        except ParseError:
            return
        for r in runs:
            if r.op_source not in ("header", "command"):
                r.op, r.op_source = self.op, "command"
        measured = [
            r
            for r in rows_from_runs(runs, placements=self.placements, **self.common)
            if r.time_us is not None
        ]
        for row in measured[self.shown :]:
            self.table.add(for_table(row))
        self.shown = len(measured)


def for_table(row: Row) -> dict[str, Any]:
    """A row as SweepTable prints it (fields an old log leaves empty shown as nccl-tests did)."""
    data = row.to_dict()
    for key, blank in (("count", 0), ("dtype", "?"), ("redop", "none"), ("size_bytes", 0)):
        if data.get(key) is None:
            data[key] = blank
    return data


def run_nccl_tests(cfg: Any, run: RunDir, env: dict[str, str]) -> int:
    """Run the sweep with nccl-tests; rows into ``run``; 0, or non-zero on any failure."""
    plan = build_plan(cfg, True)
    world = int(cfg.world_size)
    backend = cfg.backend
    binaries = {op: collective(op).binary for op in plan.collectives}
    found = find_binaries(sorted(set(binaries.values())), backend.get("home"))
    prefix, gpus_per_process, launcher = launch_prefix(cfg, world, env)
    child_env = {**os.environ, **env}
    use_json = str(backend.get("use_json", "auto")).lower()
    if use_json not in ("auto", "true", "false"):
        raise InputError(f"backend.use_json: expected auto, true or false, got {use_json!r}")
    per_iter = bool(backend.get("per_iter", False))
    timeout_s = float(cfg.get("timeout_s") or 0)
    row_env = shaping_env(child_env)

    print_run_header(f"nccl-tests on {world} ranks ({launcher})", run.build, run.run_id, env)
    writer = RowWriter(run.path)
    status = 0
    wrong_total = 0
    common: dict[str, Any] = {
        "run_id": run.run_id,
        "build": run.build,
        "source": "measured",
        "env": row_env,
        "world_size": world,
        "nodes": cfg.get("nodes"),
        "path": cfg.get("path"),
    }
    progress = bool(cfg.get("progress")) and sys.stdout.isatty()
    table = SweepTable(plan.lines, len(plan.placements), progress=progress)
    interrupted = 0
    try:
        with table, sigterm_as_exception():
            for op in plan.collectives:
                binary = found[binaries[op]]
                help_out = help_text(binary, child_env)
                json_ok = supports_json(help_out)
                if use_json == "true" and not json_ok:
                    raise InputError(
                        f"backend.use_json=true but {binary} does not list -J in its -h output "
                        "(nccl-tests older than 2.16?); use backend.use_json=auto"
                    )
                for dtype in plan.dtypes:
                    stem = f"nccl-tests-{op}-{dtype}"
                    json_path = (
                        run.path / f"{stem}.json" if json_ok and use_json != "false" else None
                    )
                    args = test_args(
                        cfg,
                        plan,
                        op,
                        dtype,
                        gpus_per_process,
                        json_path,
                        per_iter and supports_per_iter(help_out),
                    )
                    cmd = [*prefix, str(binary), *args]
                    table.print(f"# nccl-tests: {shlex.join(cmd)}")
                    live = _Live(table, plan.placements, dict(common), op)
                    outcome = stream(cmd, child_env, run.path / f"{stem}.log", timeout_s, live)
                    rows = _rows_of_outcome(
                        outcome,
                        cmd,
                        binary,
                        op,
                        json_path,
                        plan,
                        world,
                        common,
                        launcher,
                        f"{stem}.log",
                        timeout_s,
                    )
                    for row in rows:
                        writer.write(row)
                    measured = [r for r in rows if r.time_us is not None]
                    for row in measured[live.shown :]:
                        table.add(for_table(row))
                    table.flush()
                    for row in rows:
                        if row.time_us is None:
                            table.add(for_table(row))
                    facts = measured[0].extra if measured else rows[0].extra if rows else {}
                    nt = (facts or {}).get("nccl_tests") or {}
                    if "out_of_bounds" in nt:
                        table.print(
                            f"# Out of bounds values : {nt['out_of_bounds']} "
                            f"{'OK' if nt.get('out_of_bounds_ok') else 'FAILED'}"
                        )
                    if "avg_busbw_gbps" in nt:
                        table.print(f"# Avg bus bandwidth    : {nt['avg_busbw_gbps']:g}")
                    if any(r.status != "ok" for r in rows):
                        status = RunFailed.exit_code
                    wrong_total += sum(r.wrong or 0 for r in rows)
                    if outcome.interrupted:
                        interrupted = outcome.interrupted
                        break
                if interrupted:
                    break
    except (KeyboardInterrupt, Terminated) as ex:
        interrupted = 143 if isinstance(ex, Terminated) else 130
    finally:
        writer.close()
        run.finish()
    if interrupted:
        print(
            f"# {'interrupted' if interrupted == 130 else 'terminated'}: rows so far kept "
            f"in {run.path}"
        )
        return interrupted
    rows_all = run.rows()
    errors = [r for r in rows_all if r.get("status") != "ok"]
    print(f"# rows: {run.rows_path} (and rows.parquet)")
    if errors:
        first = errors[0].get("error")
        more = f" (and {len(errors) - 1} more error rows)" if len(errors) > 1 else ""
        sys.stderr.write(f"gpulane: error: {first}{more}\n")
        status = max(status, RunFailed.exit_code)
    return status


def _rows_of_outcome(
    outcome: Outcome,
    cmd: list[str],
    binary: Path,
    op: str,
    json_path: Path | None,
    plan: SweepPlan,
    world: int,
    common: dict[str, Any],
    launcher: str,
    log_name: str,
    timeout_s: float = 0,
) -> list[Row]:
    name = binary.name
    extra = {"log": log_name, "launcher": launcher, "command": shlex.join(cmd)}
    try:
        runs = parse_text(outcome.text, log_name)
    except ParseError:
        runs = []
    if json_path is not None and runs:
        path = json_path
        written = runs[0].header.json_output
        if written:
            path = Path(written)
        if path.exists():
            try:
                jrun = parse_json(path.read_text(errors="replace"), str(path))
            except ParseError:
                jrun = None
            if jrun is not None and merge_json(runs[0], jrun):
                extra["json"] = path.name
    for r in runs:
        if r.op is None or r.op_source not in ("header", "command"):
            r.op, r.op_source = op, "command"
    events: list[ErrorEvent] = []
    if outcome.timed_out:
        events.append(
            ErrorEvent(
                "timeout",
                f"printed nothing for {timeout_s:g} s and was ended by gpulane "
                "(a hang; raise timeout_s if a size legitimately takes longer)",
            )
        )
    if len(runs) > 1:
        events.append(
            ErrorEvent(
                "usage",
                f"printed {len(runs)} separate tests instead of one {world}-rank test: under "
                f"{launcher} each process ran alone; build nccl-tests with MPI=1",
            )
        )
    elif runs and runs[0].world_size is not None and runs[0].world_size != world:
        events.append(
            ErrorEvent(
                "usage",
                f"ran as {runs[0].world_size} ranks but {world} were asked for "
                "(check -g, the GPUs visible, and that nccl-tests was built with MPI=1 "
                "for mpirun/srun)",
            )
        )
    if outcome.interrupted:
        events.append(
            ErrorEvent(
                "abort",
                "interrupted (Ctrl-C)" if outcome.interrupted == 130 else "terminated (SIGTERM)",
            )
        )
    has_failure = any(e.kind != "cut_off" for r in runs for e in r.errors)
    failed_check = any((r.out_of_bounds or 0) > 0 or r.avg_busbw_check == "FAILED" for r in runs)
    exited_badly = outcome.returncode not in (0, None)
    if exited_badly and not (
        outcome.timed_out or outcome.interrupted or has_failure or failed_check
    ):
        tail = _tail(outcome.text)
        event = ErrorEvent(
            "abort", describe_exit(outcome.returncode) + (f": {tail}" if tail else "")
        )
        events.append(event)
    if events:
        # What gpulane saw (an exit status, a hang, an interrupt) explains a cut-off log:
        # keep the size where it stopped, drop the separate cut-off row.
        for r in runs:
            for cut in [e for e in r.errors if e.kind == "cut_off"]:
                if events[0].size_bytes is None:
                    events[0].size_bytes, events[0].in_place = cut.size_bytes, cut.in_place
                r.errors.remove(cut)
    if not runs:
        tail = _tail(outcome.text)
        msg = f"{name} {describe_exit(outcome.returncode)} before printing an nccl-tests table"
        if tail:
            msg += f": {tail}"
        return [
            Row(
                **common,
                kind="collective",
                backend="nccl-tests",
                op=op,
                status="error",
                error=msg,
                extra=extra,
            )
        ]
    runs[-1].errors.extend(events)
    rows = rows_from_runs(
        runs,
        **common,
        placements=plan.placements,
        extra=extra,
    )
    sizes = plan.sizes
    index = 0
    last_line: int | None = None
    for row in rows:
        if row.time_us is None:
            continue
        line = row.extra.get("line")
        if last_line is not None and line != last_line:
            index += 1
        last_line = line
        if index < len(sizes):
            row.extra["requested_bytes"] = sizes[index]
        row.extra["placements"] = len(plan.placements)
    return rows
