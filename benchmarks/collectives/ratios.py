"""The side-by-side tables of benchmarks/collectives/run_gpu.sh: nccl-tests under mpirun
against gpulane's backend=nccl, plain (C loop and Python loop) and CUDA graph, for the 7
collectives, 8 B to 8 GiB, with the ratio at every size.

Below 1 MiB every variant ran ROUNDS times, alternating with nccl-tests: the ratio per
size is the median over rounds of (gpulane time / nccl-tests time) of the same round
(DESIGN.md, "Measuring on that machine"). From 1 MiB on there is one run of each and the
ratio is busbw over nccl-tests' busbw. Points whose count is 0 (sizes below 16 bytes per
rank for the collectives that split the buffer) launch nothing on either side and are
left out of the ratios.

    python benchmarks/collectives/ratios.py OUT > OUT/tables.md
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpulane.collectives.nccl_tests.logs import rows_from_file
from gpulane.collectives.plan import DEFAULT_COLLECTIVES as COLLECTIVES
from gpulane.units import format_size

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: benchmarks.* beside gpulane
    sys.path.insert(0, str(ROOT))

from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)

SMALL_START, BIG_START = 8, 1 << 20
LATENCY_MAX = 64 << 10  # issue 20: time within 1.10 x of nccl-tests up to here
LATENCY_TARGET, BUSBW_TARGET = 1.10, 0.97
# gpulane variant -> (its builds' prefix, the nccl-tests mode it is compared with)
VARIANTS = {
    "plain C loop": ("plain-c", "plain"),
    "plain Python loop": ("plain-py", "plain"),
    "plain Python, default stream": ("plain-cur", "plain"),  # STREAM_CHECK=1 only
}
GRAPH = ("graph", "graph")
Point = tuple[str, bool, int]  # collective, in place, requested bytes


def nccl_tests_points(path: Path, start: int) -> dict[Point, dict[str, Any]]:
    """One nccl-tests log's rows by (op, in place, requested size): the i-th line of a
    placement is size start * 2**i (as -b start -f 2 steps), whatever size it prints."""
    out: dict[Point, dict[str, Any]] = {}
    seen: dict[bool, int] = defaultdict(int)
    for row in rows_from_file(path):
        if row.time_us is None:
            continue
        placed = bool(row.in_place)
        requested = start << seen[placed]
        seen[placed] += 1
        out[(row.op, placed, requested)] = row.to_dict()
    return out


def nccl_tests_runs(root: Path, mode: str, tag: str) -> dict[Point, dict[str, Any]]:
    start = BIG_START if tag == "big" else SMALL_START
    out: dict[Point, dict[str, Any]] = {}
    for coll in COLLECTIVES:
        path = root / f"nt-{mode}-{tag}-{coll}.txt"
        if path.exists():
            out.update(nccl_tests_points(path, start))
    return out


def _run_rows(run: Path) -> list[dict[str, Any]]:
    """A run directory's rows as dicts: rows.jsonl's lines, else rows.parquet's rows (the
    compact form benchmarks/ keeps; a missing cell is None, as in the JSON Lines)."""
    if (run / "rows.jsonl").exists():
        lines = (run / "rows.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]
    if not (run / "rows.parquet").exists():
        return []
    from gpulane.parquet_rows import read_parquet

    frame = read_parquet(run / "rows.parquet")
    return [
        {str(k): None if isinstance(v, float) and v != v else v for k, v in r.items()}
        for r in frame.to_dict("records")
    ]


def gpulane_runs(root: Path) -> dict[str, dict[Point, dict[str, Any]]]:
    """build label -> that run's measured rows by point."""
    out: dict[str, dict[Point, dict[str, Any]]] = {}
    for run in sorted(d for d in root.glob("runs/*") if d.is_dir()):
        for r in _run_rows(run):
            if r.get("time_us") is None or r.get("kind") != "collective":
                continue
            requested = int((r.get("extra") or {}).get("requested_bytes", r["size_bytes"]))
            out.setdefault(str(r["build"]), {})[(r["op"], bool(r["in_place"]), requested)] = r
    return out


def rounds_in(root: Path) -> list[str]:
    tags = {
        m.group(1)
        for p in root.glob("nt-plain-r*-*.txt")
        if (m := re.match(r"nt-plain-(r\d+)-", p.name))
    }
    return sorted(tags, key=lambda t: int(t[1:]))


def latency_ratios(
    root: Path, runs: dict[str, dict[Point, dict[str, Any]]], prefix: str, mode: str
) -> dict[Point, tuple[float, float, float]]:
    """point -> (median gpulane us, median nccl-tests us, median of the rounds' ratios)."""
    per: dict[Point, list[tuple[float, float]]] = defaultdict(list)
    for tag in rounds_in(root):
        nt = nccl_tests_runs(root, mode, tag)
        ours = runs.get(f"{prefix}-{tag}", {})
        for point, row in ours.items():
            ref = nt.get(point)
            if ref is None or not row.get("count") or not ref.get("count") or not ref["time_us"]:
                continue
            per[point].append((row["time_us"], ref["time_us"]))
    return {
        p: (
            statistics.median(g for g, _ in pairs),
            statistics.median(n for _, n in pairs),
            statistics.median(g / n for g, n in pairs),
        )
        for p, pairs in per.items()
    }


def busbw_ratios(
    root: Path, runs: dict[str, dict[Point, dict[str, Any]]], build: str, mode: str
) -> dict[Point, tuple[float, float, float]]:
    """point -> (gpulane busbw, nccl-tests busbw, ratio), from the runs of 1 MiB on."""
    nt = nccl_tests_runs(root, mode, "big")
    out = {}
    for point, row in runs.get(build, {}).items():
        ref = nt.get(point)
        if ref is None or not ref.get("busbw_gbps"):
            continue
        out[point] = (row["busbw_gbps"], ref["busbw_gbps"], row["busbw_gbps"] / ref["busbw_gbps"])
    return out


def _worst(values: dict[int, float], high_is_bad: bool) -> tuple[float, int] | None:
    if not values:
        return None
    pick = max if high_is_bad else min
    size = pick(values, key=lambda s: values[s])
    return values[size], size


def summary(
    lat: dict[Point, tuple[float, float, float]],
    bw: dict[Point, tuple[float, float, float]],
    coll: str,
    in_place: bool,
    plain: bool,
) -> list[str] | None:
    small = {
        p[2]: v[2] for p, v in lat.items() if p[:2] == (coll, in_place) and p[2] <= LATENCY_MAX
    }
    large = {p[2]: v[2] for p, v in bw.items() if p[:2] == (coll, in_place)}
    if not small and not large:
        return None
    worst_t, worst_b = _worst(small, True), _worst(large, False)
    cells = [
        f"{statistics.median(small.values()):.3f}" if small else "-",
        f"{worst_t[0]:.3f} ({format_size(worst_t[1])})" if worst_t else "-",
        f"{worst_b[0]:.3f} ({format_size(worst_b[1])})" if worst_b else "-",
    ]
    if plain:
        met = (worst_t is None or worst_t[0] <= LATENCY_TARGET) and (
            worst_b is None or worst_b[0] >= BUSBW_TARGET
        )
        cells.append("yes" if met else "**no**")
    else:
        cells.append("")
    return cells


def detail(
    coll: str,
    in_place: bool,
    sides: dict[
        str, tuple[dict[Point, tuple[float, float, float]], dict[Point, tuple[float, float, float]]]
    ],
) -> list[str]:
    sizes = sorted(
        {p[2] for lat, bw in sides.values() for p in (*lat, *bw) if p[:2] == (coll, in_place)}
    )
    head = ["size"]
    for name in sides:
        head += [f"nccl-tests ({name})", name, "ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for size in sizes:
        cells = [format_size(size)]
        for lat, bw in sides.values():
            key = (coll, in_place, size)
            if key in lat:
                g, n, ratio = lat[key]
                cells += [f"{n:.2f} µs", f"{g:.2f} µs", f"{ratio:.3f}"]
            elif key in bw:
                g, n, ratio = bw[key]
                cells += [f"{n:.1f} GB/s", f"{g:.1f} GB/s", f"{ratio:.3f}"]
            else:
                cells += ["-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def alltoall_table(root: Path, runs: dict[str, dict[Point, dict[str, Any]]]) -> list[str]:
    nt = nccl_tests_runs(root, "plain", "big")
    ncclmem, torchmem = runs.get("plain-big", {}), runs.get("alltoall-torchmem", {})
    lines = [
        "| size | nccl-tests out-of-place | nccl-tests in-place | backend=nccl (ncclMemAlloc) "
        "| ratio | backend=nccl (torch's allocator) | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for size in sorted(s for (op, ip, s) in ncclmem if op == "alltoall" and s >= 1 << 30):
        oop, ip = nt.get(("alltoall", False, size)), nt.get(("alltoall", True, size))
        a, b = ncclmem.get(("alltoall", False, size)), torchmem.get(("alltoall", False, size))
        ref = oop["busbw_gbps"] if oop else None
        cells = [format_size(size)]
        cells += [f"{x['busbw_gbps']:.1f}" if x else "-" for x in (oop, ip)]
        for mine in (a, b):
            cells += (
                [f"{mine['busbw_gbps']:.1f}", f"{mine['busbw_gbps'] / ref:.3f}"]
                if mine and ref
                else ["-", "-"]
            )
        lines.append("| " + " | ".join(cells) + " |")
    return lines


INFO = re.compile(r"NCCL INFO (.*)$")


def info_lines(path: Path) -> set[str]:
    """NCCL's INFO lines of one log, without host, pid, rank and addresses."""
    out = set()
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        m = INFO.search(line)
        if m:
            text = re.sub(r"0x[0-9a-f]+|pid \d+|\b\d{4,}\b", "#", m.group(1))
            out.add(text.strip())
    return out


def info_diff(root: Path) -> list[str]:
    theirs = info_lines(root / "nt-alltoall-info.txt")
    ours: set[str] = set()
    for log in root.glob("runs/*/logs/rank-*.log"):
        cfg = log.parents[1] / "config.yaml"
        if cfg.exists() and "alltoall-info" in cfg.read_text():
            ours |= info_lines(log)
    if not theirs or not ours:
        return ["(no INFO logs from one of the sides)"]
    out = ["Only in nccl-tests' INFO lines:", "```", *sorted(theirs - ours)[:60], "```"]
    out += ["Only in gpulane's INFO lines:", "```", *sorted(ours - theirs)[:60], "```"]
    return out


def default_job(root: Path) -> list[str]:
    path = root / "default.txt"
    if not path.exists():
        return ["(no default.txt)"]
    text = path.read_text(errors="replace").splitlines()
    tail = [line for line in text if line.startswith(("# torch.distributed adds", "# Avg bus"))]
    return ["```", *text[:12], "...", *tail, "```"]


def main(root: Path) -> None:
    runs = gpulane_runs(root)
    versions = root / "versions.txt"
    print("# nccl-tests against backend=nccl, side by side (benchmarks/collectives/run_gpu.sh)\n")
    if versions.exists():
        print("```\n" + versions.read_text().strip() + "\n```\n")
    print(f"Rounds below 1 MiB: {len(rounds_in(root))}. Ratios: gpulane time / nccl-tests time")
    print("(median over rounds) up to 512 KiB; busbw / nccl-tests busbw from 1 MiB.\n")
    print("## The default job's first lines\n")
    print("\n".join(default_job(root)) + "\n")
    # From 1 MiB there is one plain run, with the default loop (c): its busbw ratios go
    # with the C loop's variant only.
    sides = {
        name: (
            latency_ratios(root, runs, prefix, mode),
            busbw_ratios(root, runs, "plain-big", mode) if prefix == "plain-c" else {},
        )
        for name, (prefix, mode) in VARIANTS.items()
        if any(build.startswith(f"{prefix}-r") for build in runs)
    }
    sides["graph"] = (
        latency_ratios(root, runs, GRAPH[0], GRAPH[1]),
        busbw_ratios(root, runs, "graph-big", GRAPH[1]),
    )
    print("## Targets (issue 20: plain within 1.10x of the time up to 64 KiB, busbw >= 0.97x)\n")
    print(
        "| collective | placement | variant | time ratio ≤ 64 KiB, median | worst | busbw ratio ≥ 1 MiB, worst | met |"
    )
    print("|---|---|---|---|---|---|---|")
    for coll in COLLECTIVES:
        for in_place in (False, True):
            for name, (lat, bw) in sides.items():
                cells = summary(lat, bw, coll, in_place, plain=name != "graph")
                if cells:
                    where = "in-place" if in_place else "out-of-place"
                    print(f"| {coll} | {where} | {name} | " + " | ".join(cells) + " |")
    print()
    for coll in COLLECTIVES:
        for in_place in (False, True):
            lines = detail(coll, in_place, sides)
            if len(lines) > 2:
                print(f"### {coll}, {'in-place' if in_place else 'out-of-place'}\n")
                print("\n".join(lines) + "\n")
    print("## alltoall from 1 GiB: busbw (GB/s) and ratio to nccl-tests out-of-place\n")
    print("\n".join(alltoall_table(root, runs)) + "\n")
    print("## NCCL INFO of one 8 GiB alltoall, nccl-tests against gpulane\n")
    print("\n".join(info_diff(root)))


if __name__ == "__main__":
    main(real(Path(sys.argv[1])))
