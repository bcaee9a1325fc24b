"""`gpulane parse nccl-tests FILE --out DIR` keeps its memory flat as the log grows.

The command runs as a user runs it, in a child process, and its peak resident memory comes
from ``wait4``. The log is one table whose lines repeat (as nccl-tests' ``-N`` cycles
print) and that is cut off mid-line: its last row is an error row, whose text column the
first batch of rows did not have. That once made rows.parquet a file in parts whose first
part, nearly every row, was read back whole at the end (364 MB at 20 MB of log, 1.3 GB at
100 MB). What the interpreter and pyarrow take is paid once: the figure compared is the
growth from a 1 MB log to a 12 MB one, which holding the rows makes about 100 MB.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

import gpulane
from tests.conftest import fixture_path

# A 16-rank all_reduce log of 31 sizes (public; see tests/fixtures/public/SOURCES.md).
SOURCE = "public/nccl-tests/a3mega_2node_16xH100_mpirun_all_reduce_8G.txt"
MB = 1_000_000
# Growth allowed from the small log to the large one. Holding the rows costs about 9 MB per
# MB of this log (measured: 224 MB at 5 MB, 364 MB at 20 MB of it); streaming, a few MB in
# all. Generous, for a loaded machine and another allocator.
GROWTH_MB = 45


def cut_log(path: Path, size: int) -> int:
    """The source's header, then its table lines again and again until ``size`` bytes,
    cut in the middle of a line (no summary). The number of whole table lines."""
    lines = fixture_path(SOURCE).read_text().splitlines(keepends=True)
    table = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
    head = lines[: lines.index(table[0])]
    block = "".join(table)
    whole = (size - len("".join(head))) // len(block)
    with open(path, "w") as fh:
        fh.write("".join(head))
        for _ in range(whole):
            fh.write(block)
        fh.write(table[0][: len(table[0]) // 2])  # the cut: a line without its results
    return whole * len(table)


def parse_peak(log: Path, out: Path) -> tuple[int, int]:
    """Exit status and peak RSS (MB) of the parse command, run as a user runs it."""
    root = Path(gpulane.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "gpulane", "parse", "nccl-tests", str(log), "--out", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, round(usage.ru_maxrss / 1024)


def test_memory_does_not_follow_the_log(tmp_path: Path) -> None:
    peaks = []
    for size in (1, 12):
        log = tmp_path / f"cut-{size}mb.log"
        lines = cut_log(log, size * MB)
        out = tmp_path / f"out-{size}"
        code, peak = parse_peak(log, out)
        assert code == 0, f"{size} MB: exit {code}"
        # Every row reached the Parquet copy: two per whole line, and the cut's error row.
        parquet = pq.ParquetFile(out / "rows.parquet")
        assert parquet.metadata.num_rows == 2 * lines + 1
        last = parquet.read_row_group(parquet.num_row_groups - 1).to_pylist()[-1]
        assert last["status"] == "error" and "cut off" in last["error"]
        peaks.append(peak)
    growth = peaks[1] - peaks[0]
    assert growth < GROWTH_MB, f"peak RSS {peaks[0]} MB at 1 MB of log, {peaks[1]} MB at 12 MB"
