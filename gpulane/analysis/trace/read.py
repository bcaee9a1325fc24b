"""One trace file, whatever its format: the reader is chosen by the file's first bytes,
not its name, since profiles are often renamed when copied off a machine."""

from __future__ import annotations

from pathlib import Path

from gpulane.analysis.trace.chrome import parse_chrome_bytes
from gpulane.analysis.trace.events import DEFAULT_HBM_THRESHOLD_GBPS, Trace
from gpulane.analysis.trace.nsys import looks_like_sqlite, read_nsys_sqlite
from gpulane.errors import InputError


def read_trace(path: str | Path, hbm_threshold_gbps: float = DEFAULT_HBM_THRESHOLD_GBPS) -> Trace:
    """Read one trace file: torch.profiler Chrome JSON (.json, .json.gz) or nsys SQLite."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory; give the trace files themselves")
    if p.suffix == ".nsys-rep" or p.suffix == ".qdrep":
        raise InputError(
            f"{p}: an Nsight Systems report; export it first with "
            f"`nsys export --type sqlite {p.name}` and give the .sqlite file"
        )
    with open(p, "rb") as fh:
        head = fh.read(16)
    if looks_like_sqlite(head):
        return read_nsys_sqlite(p, hbm_threshold_gbps)
    return parse_chrome_bytes(p.read_bytes(), str(p), hbm_threshold_gbps)
