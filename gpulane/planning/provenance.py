"""What the advice combined, in words, and warnings where figures of different kinds meet.

The advisor takes collective curves from rows, compute from a GPU's roofline, and the GPU
model from the topology, the rows or the user. Rows of one build label can come from
different machines and tools (a CPU sweep beside an imported nccl-tests log of an H200),
and a directory of runs can hold files that have nothing to do with the build advised on.
This module says which rows were used and where the GPU model came from, and warns when
collective times of one kind of machine are set beside another's compute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpulane.planning.rows import as_rows
from gpulane.record import Row

CPU = "CPU ranks"


def row_machine(row: Row) -> str | None:
    """What a collective row was measured on: the GPU model its versions name, CPU ranks
    (gloo, or MPI through host memory), or None when the row does not say."""
    versions = row.versions if isinstance(row.versions, dict) else {}
    if versions.get("gpu"):
        return str(versions["gpu"])
    if str(row.backend) == "torch-gloo" or versions.get("mpi_buffers") == "host":
        return CPU
    return None


def _origin(row: Row) -> str:
    source = str(row.source or "measured")
    return "measured" if source == "measured" else f"imported from {source}"


@dataclass
class Provenance:
    lines: list[str] = field(default_factory=list)  # "# ..." lines: what was combined
    warnings: list[str] = field(default_factory=list)
    gpu_model: str | None = None  # from the topology or the rows used, if any
    gpu_source: str = "not named"

    def to_dict(self) -> dict[str, Any]:
        return {"combined": [ln.removeprefix("# ") for ln in self.lines], "warnings": self.warnings}


def _runs(rows: Sequence[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(str(r.run_id), []).append(r)
    return out


def _describe_runs(rows: Sequence[Row]) -> str:
    parts = []
    for run_id, group in _runs(rows).items():
        first = group[0]
        machine = row_machine(first) or "machine not named"
        parts.append(f"run {run_id} ({first.backend}, {machine}, {_origin(first)})")
    return "; ".join(parts)


def _gpu_of(rows: Sequence[Row]) -> tuple[str | None, str]:
    for r in rows:
        machine = row_machine(r)
        if machine not in (None, CPU):
            return machine, f"from rows of run {r.run_id}"
    return None, ""


def provenance(
    given_rows: Sequence[Row | Mapping[str, Any]],
    build: str | None,
    topology_model: str | None,
    topology_source: str,
    gpu_given: str | None,
) -> Provenance:
    """What advise combines from ``rows`` for ``build`` (the build its curves come from),
    and the GPU model it should model: given, else the topology's, else the one the rows
    of that build name (never a row of another build or kind)."""
    out = Provenance()
    rows = as_rows(given_rows)
    used = [r for r in rows if r.kind == "collective" and str(r.build) == str(build)]
    tokens = [r for r in rows if r.kind == "tokens"]
    if used:
        out.lines.append(f"# collective rows: {len(used)} of build {build}: {_describe_runs(used)}")
    if tokens:
        builds = ", ".join(sorted({str(r.build) for r in tokens}))
        out.lines.append(f"# token rows (calibration): {len(tokens)} of build {builds}")
    taken = {id(r) for r in used + tokens}
    unused = [r for r in rows if id(r) not in taken]
    if unused:
        kinds = ", ".join(
            f"{sum(1 for r in unused if r.kind == k)} {k}"
            for k in sorted({str(r.kind) for r in unused})
        )
        out.lines.append(f"# not used: {kinds} rows ({_describe_runs(unused)})")

    from_rows, rows_where = _gpu_of(used + tokens)
    if gpu_given:
        out.gpu_model, out.gpu_source = gpu_given, f"given: gpu={gpu_given}"
    elif topology_model:
        out.gpu_model, out.gpu_source = topology_model, f"from the topology, {topology_source}"
    elif from_rows:
        out.gpu_model, out.gpu_source = from_rows, rows_where
    else:
        other, where = _gpu_of(unused)
        if other:
            out.warnings.append(
                f"advise: only rows it does not use name a GPU ({other}, {where}); it is not "
                f"taken for build {build}: give gpu=NAME"
            )
    out.lines.append(f"# gpu model: {out.gpu_model or 'none named'} ({out.gpu_source})")

    machines = {m for m in (row_machine(r) for r in used) if m is not None}
    if len(machines) > 1:
        out.warnings.append(
            f"advise: the collective rows of build {build} come from different machines "
            f"({', '.join(sorted(machines))}): {_describe_runs(used)}; each collective takes "
            "the first curve that covers its size, so the advice mixes them; choose one with "
            "run=DIR"
        )
    if CPU in machines and out.gpu_model:
        out.warnings.append(
            f"advise: collective times measured on {CPU} ({_backends(used, CPU)}) are set "
            f"beside the {out.gpu_model} roofline: the prediction mixes CPU collectives with "
            "GPU compute; measure the collectives on the GPUs (gpulane sweep there, or "
            "measure=true)"
        )
    gpus = sorted(machines - {CPU})
    if out.gpu_model and gpus and (gpu_given or topology_model):
        other_gpus = [g for g in gpus if not _same_gpu(g, out.gpu_model)]
        if other_gpus:
            out.warnings.append(
                f"advise: the collective rows were measured on {', '.join(other_gpus)}, the "
                f"compute is modelled as {out.gpu_model} ({out.gpu_source})"
            )
    return out


def _backends(rows: Sequence[Row], machine: str) -> str:
    return ", ".join(sorted({str(r.backend) for r in rows if row_machine(r) == machine}))


def _same_gpu(a: str, b: str) -> bool:
    """H100 and 'NVIDIA H100 80GB HBM3' name the same model; H100 and H200 do not."""
    x, y = a.lower().removeprefix("nvidia ").strip(), b.lower().removeprefix("nvidia ").strip()
    return x in y or y in x
