"""Slurm against the local launcher on one GPU machine (benchmarks/slurm/run_gpu.sh):

    python3 benchmarks/slurm/compare_gpu.py RUNS

- the sweeps (RUNS/slurm, RUNS/local): busbw per (op, size, placement), the median over
  runs, their ratio; the transport and path label of the rows must be the same;
- the accepts (RUNS/accept-slurm, RUNS/accept-local): verdict, failed rules, the
  localization's named GPUs/pairs and subset count, and topology.json must agree.
Prints Markdown; exit 0 when everything agrees (busbw within 10 % at 64 MiB and up).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: benchmarks.* beside gpulane
    sys.path.insert(0, str(ROOT))

from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)


def rows(folder: Path) -> list[dict[str, Any]]:
    """The rows of each run directory in ``folder``: rows.jsonl, else rows.parquet (the
    compact form benchmarks/ keeps; a missing cell is None, as in the JSON Lines)."""
    out = []
    for run in sorted(d for d in folder.glob("*") if d.is_dir()):
        if (run / "rows.jsonl").exists():
            lines = (run / "rows.jsonl").read_text().splitlines()
            out += [json.loads(x) for x in lines if x.strip()]
        elif (run / "rows.parquet").exists():
            from gpulane.parquet_rows import read_parquet

            frame = read_parquet(run / "rows.parquet")
            out += [
                {str(k): None if isinstance(v, float) and v != v else v for k, v in r.items()}
                for r in frame.to_dict("records")
            ]
    return out


def sweep_figures(rs: list[dict[str, Any]]) -> dict[tuple[str, int, bool], float]:
    by: dict[tuple[str, int, bool], list[float]] = {}
    for r in rs:
        if r.get("status") == "ok" and r.get("busbw_gbps") is not None:
            by.setdefault((r["op"], r["size_bytes"], r["in_place"]), []).append(r["busbw_gbps"])
    return {k: statistics.median(v) for k, v in by.items()}


def labels(rs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(r["op"], str(r.get("transport")), str(r.get("path"))) for r in rs}


def accept_facts(folder: Path) -> dict[str, Any] | None:
    docs = sorted(folder.glob("*/accept.json"))
    if not docs:
        return None
    doc = json.loads(docs[-1].read_text())
    loc = sorted(folder.glob("*/localize/*/localize.json"))
    found = json.loads(loc[-1].read_text())["results"][0] if loc else None
    topo = docs[-1].parent / "topology.json"
    return {
        "passed": doc.get("passed"),
        "failed": sorted({c["rule"] for c in doc.get("checks", []) if c["status"] == "fail"}),
        "named": (found["gpus"], found["pairs"]) if found else None,
        "subsets": found["measurements"] if found else None,
        "topology": json.loads(topo.read_text()) if topo.exists() else None,
    }


def main(runs: Path) -> int:
    ok = True
    s_rows, l_rows = rows(runs / "slurm"), rows(runs / "local")
    slurm, local = sweep_figures(s_rows), sweep_figures(l_rows)
    print("| op | size | in place | slurm busbw (GB/s) | local busbw (GB/s) | slurm/local |")
    print("|---|---|---|---|---|---|")
    worst = 1.0
    for key in sorted(set(slurm) & set(local)):
        op, size, ip = key
        ratio = slurm[key] / local[key] if local[key] else float("nan")
        if size >= 64 << 20:
            worst = min(worst, ratio, 1 / ratio if ratio else 0.0)
        print(f"| {op} | {size} | {ip} | {slurm[key]:.4g} | {local[key]:.4g} | {ratio:.3f} |")
    same_labels = labels(s_rows) == labels(l_rows) and bool(s_rows)
    print(f"\ntransport and path per op, slurm: {sorted(labels(s_rows))}")
    print(f"transport and path per op, local: {sorted(labels(l_rows))}")
    print(f"worst slurm/local busbw ratio at 64 MiB and more (median of the runs): {worst:.3f}")
    ok = ok and worst > 0.9 and same_labels
    a_s, a_l = accept_facts(runs / "accept-slurm"), accept_facts(runs / "accept-local")
    if a_s is None or a_l is None:
        print("\naccept: missing (" + ("slurm" if a_s is None else "local") + ")")
        return 1
    print("\n| accept | passed | failed rules | localization named | subsets |")
    print("|---|---|---|---|---|")
    for name, a in (("slurm", a_s), ("local", a_l)):
        print(
            f"| {name} | {a['passed']} | {', '.join(a['failed']) or '-'} | {a['named']} | {a['subsets']} |"
        )
    same = {k: a_s[k] == a_l[k] for k in ("passed", "failed", "named", "subsets", "topology")}
    print(f"\nsame under both launchers: {same}")
    ok = ok and all(same.values())
    print(f"\noutcome: {'slurm and local agree' if ok else 'slurm and local DIFFER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(real(Path(sys.argv[1]))))
