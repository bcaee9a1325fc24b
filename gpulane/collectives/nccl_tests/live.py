"""Table lines of a running nccl-tests binary, as it prints them: its output so far parsed
again at each new table line, and the rows measured since the last call handed over (for
the live table only; the rows kept come from the whole output at the end)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpulane.collectives.nccl_tests.outcome import for_table
from gpulane.collectives.nccl_tests.rows import rows_from_runs
from gpulane.collectives.nccl_tests.text import parse_text
from gpulane.errors import ParseError
from gpulane.record import Row


@dataclass
class LiveRows:
    placements: list[bool]
    common: dict[str, Any]
    op: str
    text: list[str] = field(default_factory=list)
    shown: int = 0

    def feed(self, line: str) -> tuple[list[Row], list[str]]:
        """(new measured rows as the table shows them, lines worth showing now)."""
        self.text.append(line)
        stripped = line.strip()
        notes = []
        if "NCCL WARN" in stripped or "failure" in stripped.lower():
            notes.append(f"# nccl-tests: {stripped}")
        if not stripped[:1].isdigit():
            return [], notes
        try:
            runs = parse_text("".join(self.text), "<live>")
        except ParseError:
            return [], notes
        for r in runs:
            if r.op_source not in ("header", "command"):
                r.op, r.op_source = self.op, "command"
        measured = [
            r
            for r in rows_from_runs(runs, placements=self.placements, **self.common)
            if r.time_us is not None
        ]
        new = [for_table(row) for row in measured[self.shown :]]
        self.shown = len(measured)
        return new, notes
