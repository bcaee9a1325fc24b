"""`gpulane parse bandwidthtest|p2p|nvbandwidth FILE...`: other tools' printouts as copy rows.

Pure functions from text to :class:`gpulane.record.Row` (``parse_bandwidthtest``,
``parse_p2p``, ``parse_nvbandwidth``), so that older measurements sit in the same table as
``gpulane copy``'s rows. What a printout does not carry stays None (p2pBandwidthLatencyTest
and nvbandwidth print no buffer size).

Conventions, the same as gpulane copy's rows:
- GB/s is 1e9 bytes/s; old bandwidthTest's ``Bandwidth(MB/s)`` (2^20 bytes/s) is converted.
- A bidirectional row is one direction of two copies that ran at once, with that
  direction's bandwidth. p2pBandwidthLatencyTest prints the sum of both directions over one
  common time window, so its bidirectional figure is halved (the printed value is kept in
  ``extra.printed_gbps``); nvbandwidth already prints the measured direction alone.
- Diagonal entries (a GPU copying within its own memory) become op ``d2d`` rows.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gpulane.errors import InputError, ParseError
from gpulane.record import Row, RowWriter, new_run_id, write_parquet

BACKEND_BANDWIDTHTEST = "bandwidthTest"
BACKEND_P2P = "p2pBandwidthLatencyTest"
BACKEND_NVBANDWIDTH = "nvbandwidth"

MIB_PER_S_IN_GBPS = (1 << 20) / 1e9
_MISSING = {"n/a", "na", "-", "--", "nan"}


def _num(cell: str, source: str, line: int) -> float | None:
    """A matrix cell as a float; None for N/A-like cells."""
    text = cell.strip()
    if text.lower() in _MISSING:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"expected a number, got {text!r}", source, line) from None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def _time_us(size: int | None, gbps: float | None) -> float | None:
    if not size or not gbps:
        return None
    return size / (gbps * 1e9) * 1e6


def _row(run_id: str, backend: str, source: str, **fields: Any) -> Row:
    row = Row(run_id=run_id, kind="copy", backend=backend, op=fields.pop("op"), source=source)
    for key, value in fields.items():
        setattr(row, key, value)
    return row


# --------------------------------------------------------------------------- bandwidthTest

_BT_SECTION = re.compile(
    r"^\s*(Host to Device|Device to Host|Device to Device) Bandwidth,\s*(\d+)\s*Device\(s\)",
    re.IGNORECASE,
)
_BT_MEMORY = re.compile(r"^\s*(PINNED|PAGEABLE) Memory Transfers", re.IGNORECASE)
_BT_HEADER = re.compile(r"Transfer Size \(Bytes\)\s+Bandwidth\s*\((GB|MB)/s\)", re.IGNORECASE)
_BT_DEVICE = re.compile(r"^\s*Device\s+(\d+)\s*:\s*(.+?)\s*$")
_BT_VALUE = re.compile(r"^\s*(\d+)\s+([0-9.eE+-]+)\s*$")
_BT_OPS = {"host to device": "h2d", "device to host": "d2h", "device to device": "d2d"}


def parse_bandwidthtest(text: str, source: str = "<text>", run_id: str = "import") -> list[Row]:
    """CUDA samples' bandwidthTest (quick, range and shmoo modes; GB/s or old MB/s)."""
    rows: list[Row] = []
    devices: dict[int, str] = {}
    op: str | None = None
    ndev = 1
    memory = "pinned"
    wc = False
    unit: str | None = None
    result: str | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            unit = None if op is None else unit
            continue
        if m := _BT_DEVICE.match(line):
            devices[int(m.group(1))] = m.group(2)
            continue
        if m := _BT_SECTION.match(line):
            op = _BT_OPS[m.group(1).lower()]
            ndev = int(m.group(2))
            unit = None
            memory = "pinned"
            continue
        if m := _BT_MEMORY.match(line):
            memory = m.group(1).lower()
            continue
        if "write-combined" in line.lower():
            wc = "enabled" in line.lower()
            continue
        if m := _BT_HEADER.search(line):
            if op is None:
                raise ParseError(
                    "a transfer table before any '... Bandwidth' heading", source, lineno
                )
            unit = m.group(1).upper()
            continue
        if line.strip().startswith("Result ="):
            result = line.split("=", 1)[1].strip()
            continue
        if unit is not None and op is not None:
            m = _BT_VALUE.match(line.replace("\t", " "))
            if not m:
                unit = None
                continue
            size = int(m.group(1))
            value = _num(m.group(2), source, lineno)
            if value is None:
                continue
            gbps = value * MIB_PER_S_IN_GBPS if unit == "MB" else value
            gpu = "GPU" + ",".join(str(d) for d in sorted(devices)) if ndev > 1 else None
            if gpu is None:
                gpu = f"GPU{min(devices)}" if devices else "GPU0"
            mem = (
                "device" if op == "d2d" else ("pinned-wc" if wc and memory == "pinned" else memory)
            )
            src, dst = {"h2d": ("host", gpu), "d2h": (gpu, "host"), "d2d": (gpu, gpu)}[op]
            extra: dict[str, Any] = {"line": lineno}
            if devices:
                extra["gpu_model"] = sorted(set(devices.values()))[0]
            if ndev > 1:
                extra["devices"] = ndev
            if unit == "MB":
                extra["printed_mbps"] = value
            rows.append(
                _row(
                    run_id, BACKEND_BANDWIDTHTEST, source, op=op, memory=mem, src=src, dst=dst,
                    bidirectional=False, size_bytes=size, algbw_gbps=gbps,
                    time_us=_time_us(size, gbps), world_size=ndev, extra=extra,
                )
            )  # fmt: skip
    if not rows:
        raise ParseError("no bandwidthTest transfer table found", source)
    if result is not None and result.upper() != "PASS":
        for row in rows:
            row.status = "error"
            row.error = f"bandwidthTest reported Result = {result}"
    return rows


# --------------------------------------------------------------------- p2pBandwidthLatency

_P2P_BW = re.compile(
    r"^\s*(Unidirectional|Bidirectional)\s+P2P=(Enabled|Disabled)\s+Bandwidth"
    r"(?:\s*\(P2P (Writes|Reads)\))?\s+Matrix\s*\(GB/s\)",
    re.IGNORECASE,
)
_P2P_LAT = re.compile(
    r"^\s*P2P=(Enabled|Disabled)\s+Latency(?:\s*\(P2P (Writes|Reads)\))?\s+Matrix\s*\(us\)",
    re.IGNORECASE,
)
_P2P_DEVICE = re.compile(r"^\s*Device:\s*(\d+),\s*([^,]+),")
_MATRIX_HEAD = re.compile(r"^\s*(D\\D|GPU|CPU)((?:\s+\d+)+)\s*$")


def _read_matrix(
    lines: list[str], start: int, source: str
) -> tuple[str, list[int], dict[int, list[float | None]], int]:
    """A square-ish matrix: a header ``D\\D 0 1 ...`` then ``i v v ...`` rows.

    Returns (corner label, column ids, rows by id, index of the next unread line).
    """
    head = _MATRIX_HEAD.match(lines[start])
    if not head:
        raise ParseError("expected a matrix header such as 'D\\D 0 1'", source, start + 1)
    cols = [int(c) for c in head.group(2).split()]
    out: dict[int, list[float | None]] = {}
    i = start + 1
    while i < len(lines):
        parts = lines[i].split()
        if not parts or not re.fullmatch(r"\d+", parts[0]):
            break
        if len(parts) != len(cols) + 1:
            raise ParseError(
                f"matrix row has {len(parts) - 1} values for {len(cols)} columns", source, i + 1
            )
        out[int(parts[0])] = [_num(p, source, i + 1) for p in parts[1:]]
        i += 1
    if not out:
        raise ParseError("matrix header with no rows", source, start + 1)
    return head.group(1), cols, out, i


def _next_content(lines: list[str], i: int) -> int:
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


def parse_p2p(text: str, source: str = "<text>", run_id: str = "import") -> list[Row]:
    """CUDA samples' p2pBandwidthLatencyTest: bandwidth and latency matrices."""
    lines = text.splitlines()
    rows: list[Row] = []
    models: dict[int, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if m := _P2P_DEVICE.match(line):
            models[int(m.group(1))] = m.group(2).strip()
            i += 1
            continue
        bw = _P2P_BW.match(line)
        lat = _P2P_LAT.match(line)
        if not bw and not lat:
            i += 1
            continue
        heading_line = i + 1
        i = _next_content(lines, i + 1)
        if i >= len(lines):
            raise ParseError(
                "matrix heading at the end of the file (cut off?)", source, heading_line
            )
        if bw:
            bidir = bw.group(1).lower() == "bidirectional"
            peer = bw.group(2).lower() == "enabled"
            method = (bw.group(3) or "writes").lower() if peer else None
            _, cols, matrix, i = _read_matrix(lines, i, source)
            for r, values in matrix.items():
                for c, value in zip(cols, values, strict=True):
                    if value is None:
                        continue
                    gbps = value / 2 if bidir else value
                    extra: dict[str, Any] = {"line": heading_line}
                    if bidir:
                        extra["printed_gbps"] = value
                    if method:
                        extra["p2p_method"] = method
                    if r in models:
                        extra["gpu_model"] = models[r]
                    rows.append(
                        _row(
                            run_id, BACKEND_P2P, source, op="p2p" if r != c else "d2d",
                            memory="device", src=f"GPU{r}", dst=f"GPU{c}", peer_access=peer,
                            bidirectional=bidir, algbw_gbps=gbps, world_size=len(cols),
                            extra=extra,
                        )
                    )  # fmt: skip
            continue
        assert lat is not None
        peer = lat.group(1).lower() == "enabled"
        method = (lat.group(2) or "writes").lower() if peer else None
        # One or two matrices follow: GPU-timed, then CPU-timed.
        while i < len(lines) and _MATRIX_HEAD.match(lines[i]):
            corner, cols, matrix, i = _read_matrix(lines, i, source)
            timer = "cpu" if corner.upper() == "CPU" else "gpu"
            for r, values in matrix.items():
                for c, value in zip(cols, values, strict=True):
                    if value is None:
                        continue
                    extra = {"line": heading_line, "test": "latency", "timer": timer}
                    if method:
                        extra["p2p_method"] = method
                    rows.append(
                        _row(
                            run_id, BACKEND_P2P, source, op="p2p" if r != c else "d2d",
                            memory="device", src=f"GPU{r}", dst=f"GPU{c}", peer_access=peer,
                            bidirectional=False, time_us=value, time_us_p50=None,
                            world_size=len(cols), extra=extra,
                        )
                    )  # fmt: skip
            i = _next_content(lines, i)
    if not rows:
        raise ParseError("no p2pBandwidthLatencyTest matrix found", source)
    return rows


# ----------------------------------------------------------------------------- nvbandwidth

_NVB_RUNNING = re.compile(r"^\s*Running\s+(\S+?)\.?\s*$")
_NVB_TITLE = re.compile(
    r"^\s*memcpy\s+(CE|SM)\s+(.*?)\s+(?:total\s+)?(bandwidth|latency)\s*\((GB/s|ns|us)\)",
    re.IGNORECASE,
)
_NVB_SUM = re.compile(r"^\s*SUM\s+(\S+)\s+([0-9.eE+-]+)\s*$")
_NVB_HEAD = re.compile(r"^\s*(\d+(?:\s+\d+)*)\s*$")
_NVB_DEVICE = re.compile(r"^\s*Device\s+(\d+):\s*(.+?)\s*$")


def _nvb_direction(test: str, title: str) -> tuple[str, bool, str] | None:
    """(op, bidirectional, orientation) of an nvbandwidth testcase.

    orientation says how a cell (row r, column c) maps to src -> dst: ``host-col`` (host and
    GPU c), ``row-col`` (GPU r -> GPU c), ``col-row`` (GPU c -> GPU r), ``all-col``
    (every GPU -> GPU c), ``col-all`` (GPU c -> every GPU).
    """
    name = test.lower()
    bidir = "bidirectional" in name
    if name.startswith(("host_to_device", "host_to_all")):
        return "h2d", bidir, "host-col"
    if name.startswith(("device_to_host", "all_to_host")):
        return "d2h", bidir, "host-col"
    if name.startswith("all_to_one"):
        return "p2p", bidir, "all-col"
    if name.startswith("one_to_all"):
        return "p2p", bidir, "col-all"
    if name.startswith("device_to_device"):
        arrow = re.search(r"GPU\(row\)\s*(<->|->|<-)\s*GPU\(column\)", title)
        if arrow and arrow.group(1) == "<-":
            return "p2p", bidir, "col-row"
        return "p2p", bidir, "row-col"
    return None


def parse_nvbandwidth(text: str, source: str = "<text>", run_id: str = "import") -> list[Row]:
    """nvbandwidth's per-testcase matrices (CE and SM copies, host and device tests)."""
    lines = text.splitlines()
    rows: list[Row] = []
    models: dict[int, str] = {}
    versions: dict[str, str] = {}
    skipped: list[str] = []
    test: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("nvbandwidth Version:"):
            versions["nvbandwidth"] = line.split(":", 1)[1].strip()
        elif line.startswith("CUDA Driver Version:"):
            versions["cuda_driver"] = line.split(":", 1)[1].strip()
        elif line.startswith("Driver Version:"):
            versions["driver"] = line.split(":", 1)[1].strip()
        elif m := _NVB_DEVICE.match(line):
            models[int(m.group(1))] = m.group(2)
        elif m := _NVB_RUNNING.match(line):
            test = m.group(1)
        elif m := _NVB_SUM.match(line):
            total = _num(m.group(2), source, i + 1)
            for row in rows:
                if row.extra.get("test") == m.group(1):
                    row.extra["sum_gbps"] = total
        elif (m := _NVB_TITLE.match(line)) and test is not None:
            title_line = i + 1
            engine, title, what, unit = (
                m.group(1).upper(),
                m.group(2),
                m.group(3).lower(),
                m.group(4),
            )
            i += 1
            if i >= len(lines) or not _NVB_HEAD.match(lines[i]):
                raise ParseError("expected a row of column numbers under the title", source, i + 1)
            cols = [int(c) for c in lines[i].split()]
            i += 1
            direction = _nvb_direction(test, title)
            if direction is None:
                skipped.append(test)
            while i < len(lines):
                parts = lines[i].split()
                if not parts or not re.fullmatch(r"\d+", parts[0]):
                    break
                if len(parts) != len(cols) + 1:
                    raise ParseError(
                        f"matrix row has {len(parts) - 1} values for {len(cols)} columns",
                        source,
                        i + 1,
                    )
                r = int(parts[0])
                for c, cell in zip(cols, parts[1:], strict=True):
                    value = _num(cell, source, i + 1)
                    if value is None or direction is None:
                        continue
                    op, bidir, orient = direction
                    src, dst = {
                        "host-col": ("host", f"GPU{c}") if op == "h2d" else (f"GPU{c}", "host"),
                        "row-col": (f"GPU{r}", f"GPU{c}"),
                        "col-row": (f"GPU{c}", f"GPU{r}"),
                        "all-col": ("all", f"GPU{c}"),
                        "col-all": (f"GPU{c}", "all"),
                    }[orient]
                    extra: dict[str, Any] = {"test": test, "engine": engine, "line": title_line}
                    if test.lower().startswith(("host_to_all", "all_to_host")):
                        extra["concurrent"] = "all"
                    gpu = int(dst[3:]) if dst.startswith("GPU") else c
                    if gpu in models:
                        extra["gpu_model"] = models[gpu]
                    fields: dict[str, Any] = {}
                    if what == "latency":
                        fields["time_us"] = value / 1000 if unit == "ns" else value
                        extra["test_kind"] = "latency"
                    else:
                        fields["algbw_gbps"] = value
                    rows.append(
                        _row(
                            run_id, BACKEND_NVBANDWIDTH, source, op=op, src=src, dst=dst,
                            memory="device" if op == "p2p" else "pinned",
                            peer_access=True if op == "p2p" else None, bidirectional=bidir,
                            world_size=len(models) or None, versions=dict(versions),
                            extra=extra, **fields,
                        )
                    )  # fmt: skip
                i += 1
            continue
        i += 1
    if not rows:
        what = f" (testcases not understood: {', '.join(skipped)})" if skipped else ""
        raise ParseError(f"no nvbandwidth result matrix found{what}", source)
    return rows


# --------------------------------------------------------------------------------- command

Parser = Callable[[str, str, str], list[Row]]


def format_rows(rows: Iterable[Row]) -> str:
    """A readable listing: one line per row."""
    out = [
        f"# {'backend':<24} {'op':<4} {'src':>6} -> {'dst':<6} {'memory':<9} {'peer':<5} "
        f"{'bidir':<5} {'size (B)':>12} {'time (us)':>10} {'GB/s':>9}"
    ]
    for r in rows:
        size = "" if r.size_bytes is None else str(r.size_bytes)
        time = "" if r.time_us is None else f"{r.time_us:.2f}"
        bw = "" if r.algbw_gbps is None else f"{r.algbw_gbps:.2f}"
        peer = "" if r.peer_access is None else ("on" if r.peer_access else "off")
        bidir = "yes" if r.bidirectional else "no"
        flag = "" if r.status == "ok" else f"  [{r.status}: {r.error}]"
        out.append(
            f"  {r.backend:<24} {r.op:<4} {r.src or '':>6} -> {r.dst or '':<6} "
            f"{r.memory or '':<9} {peer:<5} {bidir:<5} {size:>12} {time:>10} {bw:>9}{flag}"
        )
    return "\n".join(out)


def _main(argv: list[str], name: str, parse: Parser) -> int:
    ap = argparse.ArgumentParser(
        prog=f"gpulane parse {name}",
        description=f"Import {name} printouts as gpulane copy rows.",
    )
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON Lines")
    ap.add_argument("--out", metavar="DIR", help="also write a run directory under DIR")
    ap.add_argument("--build", help="build label of the rows (default: the file's name)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as ex:
        return ex.code if isinstance(ex.code, int) else 2
    run_id = new_run_id("import")
    rows: list[Row] = []
    for name_ in args.files:
        path = Path(name_)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            raise InputError(f"{name_}: cannot read: {err.strerror or err}") from err
        for row in parse(text, str(path), run_id):
            row.build = args.build or path.stem
            rows.append(row)
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps(row.to_dict(), default=str) + "\n")
    else:
        print(format_rows(rows))
    if args.out:
        run_dir = Path(args.out) / run_id
        try:
            with RowWriter(run_dir) as writer:
                for row in rows:
                    writer.write(row)
        except OSError as err:
            raise InputError(f"--out: cannot write {run_dir}: {err.strerror or err}") from err
        write_parquet(run_dir)
        sys.stderr.write(f"# {len(rows)} rows: {run_dir / 'rows.jsonl'} (and rows.parquet)\n")
    return 0


def main_bandwidthtest(argv: list[str]) -> int:
    return _main(argv, "bandwidthtest", parse_bandwidthtest)


def main_p2p(argv: list[str]) -> int:
    return _main(argv, "p2p", parse_p2p)


def main_nvbandwidth(argv: list[str]) -> int:
    return _main(argv, "nvbandwidth", parse_nvbandwidth)
