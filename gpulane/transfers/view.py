"""How a copy run shows in the session: each section's table once the section is over
(the host table of a GPU, the all-GPUs table, the peer matrices), a progress count of
points, and the sections that failed or copied wrong data as the run's problems."""

from __future__ import annotations

from gpulane.record import Row
from gpulane.transfers.matrices import aggregate_table, host_table, p2p_matrices


def section_of(row: Row) -> tuple[str, str]:
    """Which printed section a row belongs to: (kind, GPU) for a GPU's host copies."""
    extra = row.extra or {}
    if row.op == "p2p":
        return ("p2p", "")
    if extra.get("test") == "all-gpus" or extra.get("aggregate"):
        return ("all", "")
    gpu = row.dst if row.op == "h2d" else row.src
    return ("host", str(gpu))


class CopyView:
    def __init__(self, points: int | None = None) -> None:
        self.total: int | None = points
        self.rows: list[Row] = []
        self.section: tuple[str, str] | None = None
        self.points = 0

    def add(self, row: Row) -> list[str]:
        out: list[str] = []
        if row.status == "error" and row.time_us is None:
            return [f"# error: {row.error}"]
        section = section_of(row)
        if self.section is not None and section != self.section:
            out += self._table(self.section)
        self.section = section
        self.rows.append(row)
        self.points += 1
        return out

    def _table(self, section: tuple[str, str]) -> list[str]:
        kind, gpu = section
        if kind == "host":
            return [host_table(self.rows, gpu)]
        if kind == "all":
            return [aggregate_table(self.rows)]
        return [p2p_matrices(self.rows)]

    def flush(self) -> list[str]:
        if self.section is None:
            return []
        section, self.section = self.section, None
        return self._table(section)

    def done(self) -> int:
        return self.points

    def current(self) -> str:
        if self.section is None:
            return "copies"
        kind, gpu = self.section
        return {"host": f"host <-> {gpu}", "all": "all GPUs at once", "p2p": "peer copies"}[kind]

    def summary(self, rows: list[Row]) -> list[str]:
        return []

    def problems(self, rows: list[Row]) -> list[str]:
        out = [str(r.error) for r in rows if r.status == "error" and not r.wrong]
        wrong = [r for r in rows if r.wrong]
        if wrong:
            where = ", ".join(
                f"{r.op} {r.src}->{r.dst} {r.memory} {r.size_bytes} B" for r in wrong[:5]
            )
            out.append(f"data differs after the copy at {where}")
        return out
