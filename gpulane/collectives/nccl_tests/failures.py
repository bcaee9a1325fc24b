"""Failure messages in nccl-tests output, and what each one means.

From nccl-tests' own printing (``src/common.h`` NCCLCHECK/CUDACHECK/TESTCHECK):
``host: Test NCCL failure file:line '...'``, ``Test CUDA failure``,
`` .. host pid N: Test failure file:line``, ``Test timeout``; usage errors; and aborts
reported by the process, mpirun or srun. NCCL WARN lines are kept as context.
"""

from __future__ import annotations

import re

from gpulane.collectives.nccl_tests.model import ErrorEvent

_NCCL_FAIL_RE = re.compile(
    r"(?:(\S+):\s+)?Test NCCL failure\s+(\S+:\d+)\s*(?:'(.*?)'?\s*$)?", re.DOTALL
)
_CUDA_FAIL_RE = re.compile(r"(?:(\S+):\s+)?Test CUDA failure\s+(\S+:\d+)\s*(?:'(.*?)'?\s*$)?")
_TEST_FAIL_RE = re.compile(r"\.\.\s+(\S+)\s+pid\s+(\d+):\s+Test failure\s+(\S+:\d+)")
_TIMEOUT_RE = re.compile(r"(?:(\S+):\s+)?Test timeout\s+\((\d+)s\)\s*(\S+:\d+)?")
_USAGE_RES = (
    re.compile(r"Invalid number of GPUs:.*"),
    re.compile(r"invalid sizes? (?:for|specified for) .*"),
    re.compile(r"Incompatible NCCL versions.*"),
    re.compile(r"Device implementation \d+ is not supported.*"),
    re.compile(r"Option -[A-Z] \(.*\) requires NCCL.*"),
)
_ABORT_RES = (
    re.compile(r"mpirun noticed that process rank \d+ .*"),
    re.compile(r"MPI_ABORT was invoked on rank \d+.*"),
    re.compile(r"\*\*\* Process received signal \*\*\*"),
    re.compile(r"Signal: [A-Za-z ]+ \(\d+\)"),
    re.compile(r"terminate called after throwing.*"),
    re.compile(r"srun: error: .*"),
    re.compile(r"slurmstepd: error: .*"),
    re.compile(r"Primary job\s+terminated normally, but \d+ process(?:es)? returned.*"),
    re.compile(r"mpirun detected that one or more processes exited with non-zero status.*"),
    re.compile(r"^(?:Segmentation fault|Aborted|Killed|Bus error)\b.*"),
    re.compile(r".*\(core dumped\).*"),
)
_WARN_RE = re.compile(r"NCCL WARN\s*(.*?)\s*$")
_NOISE_RE = re.compile(r"NCCL (?:INFO|TRACE)\b")


def warning_of(text: str) -> str | None:
    """The message of an NCCL WARN line, or None."""
    m = _WARN_RE.search(text)
    return m.group(1) if m else None


def is_noise(text: str) -> bool:
    """NCCL INFO/TRACE output, interleaved with nccl-tests' own."""
    return _NOISE_RE.search(text) is not None


def failure_of(text: str) -> ErrorEvent | None:
    """The failure that ``text`` reports, or None. A TESTCHECK stack line
    (`` .. host pid N: Test failure file:line``) is kind ``test``: the reader adds it to the
    failure before it where there is one."""
    m = _NCCL_FAIL_RE.search(text)
    if m:
        host = f" on {m.group(1)}" if m.group(1) else ""
        msg = f"'{m.group(3)}'" if m.group(3) else ""
        return ErrorEvent("nccl", f"Test NCCL failure {m.group(2)}{host}: {msg}".rstrip(": "))
    m = _CUDA_FAIL_RE.search(text)
    if m:
        host = f" on {m.group(1)}" if m.group(1) else ""
        msg = f"'{m.group(3)}'" if m.group(3) else ""
        return ErrorEvent("cuda", f"Test CUDA failure {m.group(2)}{host}: {msg}".rstrip(": "))
    m = _TIMEOUT_RE.search(text)
    if m:
        where = f" at {m.group(3)}" if m.group(3) else ""
        return ErrorEvent("timeout", f"Test timeout ({m.group(2)} s){where}")
    m = _TEST_FAIL_RE.search(text)
    if m:
        return ErrorEvent("test", f"Test failure {m.group(3)} (pid {m.group(2)} on {m.group(1)})")
    for rx in _USAGE_RES:
        m = rx.search(text)
        if m:
            return ErrorEvent("usage", m.group(0).strip())
    for rx in _ABORT_RES:
        m = rx.search(text)
        if m:
            return ErrorEvent("abort", m.group(0).strip())
    return None
