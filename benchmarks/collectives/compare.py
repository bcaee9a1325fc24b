"""Side-by-side tables: gpulane's torch and NCCL backends against nccl-tests.

Reads what benchmarks/gpu/run_collectives.sh recorded (gpulane run directories and
nccl-tests logs) and prints Markdown tables, one per collective and mode, with the
ratio per size and the per-collective overhead of each backend in microseconds.

    python benchmarks/collectives/compare.py benchmarks/collectives/h200x2 > tables.md
    python benchmarks/collectives/compare.py --memory DIR [NT_DIR]  # `memory` part
        (gpulane runs in DIR/runs; nccl-tests logs in NT_DIR, default DIR)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpulane.collectives.nccl_tests.logs import rows_from_file
from gpulane.units import format_size

# torch.distributed's all_reduce is in-place only; all_gather runs both ways: compare
# each collective in a placement every side has.
PLACEMENT = {"all_reduce": True, "all_gather": False}


def gpulane_runs(root: Path) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    out = []
    for rows_file in sorted(root.glob("runs/*/rows.jsonl")):
        rows = [json.loads(line) for line in rows_file.read_text().splitlines() if line]
        cfg = (rows_file.parent / "config.yaml").read_text()
        out.append(({"config": cfg, "dir": rows_file.parent.name}, rows))
    return out


def pick(rows: list[dict[str, Any]], op: str, in_place: bool) -> dict[int, dict[str, Any]]:
    return {
        r["size_bytes"]: r
        for r in rows
        if r["op"] == op and r["in_place"] == in_place and r.get("time_us") is not None
    }


def nccl_tests_rows(path: Path, op: str, in_place: bool) -> dict[int, dict[str, Any]]:
    return {
        r.size_bytes: r.to_dict()
        for r in rows_from_file(path)
        if r.op == op and r.in_place == in_place and r.time_us is not None
    }


def find(runs: list[Any], backend: str, graph: bool, dtype: str, preset: str, op: str) -> list[Any]:
    for _meta, rows in runs:
        ok = [r for r in rows if r.get("time_us") is not None and r["op"] == op]
        if not ok:
            continue
        r0 = ok[0]
        env = r0.get("env") or {}
        run_preset = (
            "socket"
            if env.get("NCCL_SHM_DISABLE") == "1"
            else "pcie-host"
            if env.get("NCCL_P2P_DISABLE") == "1"
            else "nvlink"
        )
        if (
            r0["backend"] == backend
            and bool(r0["graph"]) == graph
            and r0["dtype"] == dtype
            and run_preset == preset
            and env.get("NCCL_GRAPH_MIXING_SUPPORT", "0") == "0"
        ):
            return rows
    return []


def table(title: str, nt: dict[int, Any], sides: dict[str, dict[int, Any]]) -> str:
    names = list(sides)
    head = ["size", "nccl-tests us", "nccl-tests busbw"]
    for n in names:
        head += [f"{n} us", f"{n} busbw", f"{n}/nt busbw", f"{n} overhead us"]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for size in sorted(nt):
        ref = nt[size]
        cells = [format_size(size), f"{ref['time_us']:.2f}", f"{ref['busbw_gbps']:.2f}"]
        for n in names:
            got = sides[n].get(size)
            if got is None:
                cells += ["-"] * 4
                continue
            ratio = got["busbw_gbps"] / ref["busbw_gbps"] if ref["busbw_gbps"] else float("nan")
            cells += [
                f"{got['time_us']:.2f}",
                f"{got['busbw_gbps']:.2f}",
                "-" if ref["busbw_gbps"] < 0.005 else f"{ratio:.3f}",
                f"{got['time_us'] - ref['time_us']:+.2f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary(nt: dict[int, Any], side: dict[int, Any], name: str, mode: str) -> str:
    big = [s for s in nt if s >= 1 << 20 and s in side and nt[s]["busbw_gbps"] > 0]
    small = [s for s in nt if s <= 64 << 10 and s in side and s > 0]
    parts = [f"{name} {mode}:"]
    if big:
        ratios = [side[s]["busbw_gbps"] / nt[s]["busbw_gbps"] for s in big]
        worst = min(zip(ratios, big, strict=True))
        parts.append(
            f"busbw/nt >= 1 MiB: min {worst[0]:.3f} at {format_size(worst[1])}, "
            f"mean {sum(ratios) / len(ratios):.3f}"
        )
    if small:
        lat = [side[s]["time_us"] / nt[s]["time_us"] for s in small]
        parts.append(f"time/nt 8 B-64 KiB: max {max(lat):.2f}, mean {sum(lat) / len(lat):.2f}")
    return " ".join(parts)


def main(root: Path) -> None:
    runs = gpulane_runs(root)
    notes = []
    modes = [
        ("float", "plain", False, "float", "nvlink"),
        ("float-graph", "graph", True, "float", "nvlink"),
        ("bfloat16-graph", "graph bf16", True, "bfloat16", "nvlink"),
        ("pcie-host", "pcie-host", False, "float", "pcie-host"),
        ("socket", "socket", False, "float", "socket"),
    ]
    for op, in_place in PLACEMENT.items():
        for suffix, mode, graph, dtype, preset in modes:
            log = root / f"nt-{op}-{suffix}.txt"
            if not log.exists():
                continue
            nt = nccl_tests_rows(log, op, in_place)
            sides = {
                b: pick(
                    find(
                        runs,
                        f"{'torch-nccl' if b == 'torch' else 'nccl'}",
                        graph,
                        dtype,
                        preset,
                        op,
                    ),
                    op,
                    in_place,
                )
                for b in ("torch", "nccl")
            }
            where = "in-place" if in_place else "out-of-place"
            print(table(f"{op} {mode} ({dtype}, {where})", nt, sides))
            for b, side in sides.items():
                notes.append(summary(nt, side, b, f"{op} {mode}"))
    print("### Summary\n")
    for n in notes:
        print(f"- {n}")


def memory_variant(rows: list[dict[str, Any]]) -> str:
    extra = rows[0].get("extra") or {}
    mem = str(extra.get("memory", "torch"))
    return f"{mem}-reg" if extra.get("registered") else mem


def main_memory(root: Path, nt_root: Path) -> None:
    """The NCCL and torch backends on torch, ncclMemAlloc and registered buffers against
    nccl-tests without (-R 0) and with (-R 1) registered buffers."""
    runs = [
        rows
        for _meta, rows in gpulane_runs(root)
        if rows and rows[0]["backend"] in ("nccl", "torch-nccl")
    ]
    notes = []
    modes = [
        ("float-R{r}", "plain", False, "float"),
        ("float-graph-R{r}", "graph", True, "float"),
        ("bfloat16-graph-R{r}", "graph", True, "bfloat16"),
    ]
    for op in ("all_reduce", "all_gather"):
        for in_place in (False, True):
            for suffix, mode, graph, dtype in modes:
                sides: dict[str, dict[int, Any]] = {}
                for rows in runs:
                    if bool(rows[0]["graph"]) != graph:
                        continue
                    sel = [r for r in rows if r["dtype"] == dtype]
                    side = pick(sel, op, in_place)
                    if side:
                        name = memory_variant(rows)
                        backend = rows[0]["backend"]
                        sides[name if backend == "nccl" else f"{backend} {name}"] = side
                where = "in-place" if in_place else "out-of-place"
                for reg in (0, 1):
                    log = nt_root / f"nt-{op}-{suffix.format(r=reg)}.txt"
                    if not log.exists() or not sides:
                        continue
                    nt = nccl_tests_rows(log, op, in_place)
                    title = f"{op} {mode} ({dtype}, {where}) against nccl-tests -R {reg}"
                    print(table(title, nt, sides))
                    for name, side in sides.items():
                        notes.append(
                            summary(nt, side, name, f"{op} {mode} {dtype} {where} vs -R {reg}")
                        )
    print("### Summary\n")
    for n in notes:
        print(f"- {n}")


if __name__ == "__main__":
    if sys.argv[1] == "--memory":
        main_memory(Path(sys.argv[2]), Path(sys.argv[3] if len(sys.argv) > 3 else sys.argv[2]))
    else:
        main(Path(sys.argv[1]))
