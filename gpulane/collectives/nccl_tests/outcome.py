"""What one nccl-tests binary left behind, as rows: its output parsed (the -J JSON's full
precision merged in where it wrote one), and what gpulane saw of the process (an exit
status, silence past timeout_s, an interrupt, several separate tests where one world was
asked for) as error rows a user can act on. Pure: the session runs the binary."""

from __future__ import annotations

import dataclasses
import shlex
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.collectives.nccl_tests.jsonfile import parse_json
from gpulane.collectives.nccl_tests.model import EXIT_STATUS, ErrorEvent, TestRun
from gpulane.collectives.nccl_tests.rows import rows_from_runs
from gpulane.collectives.nccl_tests.text import parse_text
from gpulane.collectives.plan import SweepPlan
from gpulane.errors import ParseError
from gpulane.record import Row


@dataclass
class Outcome:
    returncode: int | None
    text: str
    timed_out: bool = False
    interrupted: int = 0  # 130 (Ctrl-C) or 143 (SIGTERM)
    lines: list[str] = field(default_factory=list)


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


def for_table(row: Row) -> Row:
    """A row as the sweep table prints it (fields an old log leaves empty shown as nccl-tests did)."""
    blanks: dict[str, Any] = {"count": 0, "dtype": "?", "redop": "none", "size_bytes": 0}
    return dataclasses.replace(
        row, **{key: blank for key, blank in blanks.items() if getattr(row, key) is None}
    )


def rows_of_outcome(
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
            Row.collective(
                **common,
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
