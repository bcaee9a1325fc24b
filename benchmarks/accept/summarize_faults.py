"""What benchmarks/accept/run_faults_gpu.sh recorded, as one Markdown summary:

    python3 benchmarks/accept/summarize_faults.py OUTDIR > OUTDIR/summary.md

Per step (times.tsv and OUTDIR/<step>/accept.json): the exit status and what was expected,
the verdict, the wall seconds, where they went (accept.json "seconds": suite, doctor,
rules, localize, report, and each suite step's own), and the GPUs the `localize` checks
name. Exit 0 when every step is as expected: healthy and healthy-again PASS naming nothing,
busy-gpu2 FAIL naming GPU2 alone, pair01 FAIL naming GPU0 and GPU1 alone.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: benchmarks.* beside gpulane
    sys.path.insert(0, str(ROOT))

from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)

# step -> (expected exit, the GPUs localization must name)
EXPECTED: dict[str, tuple[int, set[str]]] = {
    "healthy": (0, set()),
    "busy-gpu2": (1, {"GPU2"}),
    "pair01": (1, {"GPU0", "GPU1"}),
    "healthy-again": (0, set()),
}


def step_facts(out: Path, step: str) -> dict[str, Any]:
    doc_path = out / step / "accept.json"
    if not doc_path.exists():
        return {"verdict": "missing", "named": set(), "phases": {}, "steps": {}}
    doc = json.loads(doc_path.read_text())
    named = {
        str(c["subject"])
        for c in doc.get("checks", [])
        if c.get("rule") == "localize" and c.get("status") == "fail"
    }
    return {
        "verdict": doc.get("verdict"),
        "named": named,
        "phases": doc.get("seconds") or {},
        "steps": {s["name"]: s.get("seconds") for s in doc.get("steps", [])},
    }


def main(out: Path) -> int:
    with (out / "times.tsv").open() as f:
        times = {r["step"]: r for r in csv.DictReader(f, delimiter="\t")}
    print("| step | expected exit | exit | verdict | seconds | localization named | as expected |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    phases_lines = []
    for step, (want_rc, want_named) in EXPECTED.items():
        t = times.get(step)
        facts = step_facts(out, step)
        rc = int(t["exit"]) if t else None
        good = rc == want_rc and facts["named"] == want_named
        ok = ok and good
        named = ", ".join(sorted(facts["named"])) or "-"
        secs = t["seconds"] if t else "-"
        print(
            f"| {step} | {want_rc} | {rc} | {facts['verdict']} | {secs} | {named} | "
            f"{'yes' if good else 'NO'} |"
        )
        parts = ", ".join(f"{k} {v}" for k, v in facts["phases"].items())
        steps = ", ".join(f"{k} {v}" for k, v in facts["steps"].items())
        phases_lines.append(f"- {step}: {parts or '-'} (suite steps: {steps or '-'})")
    print("\nSeconds per phase (accept.json `seconds`; the topo step runs beside the sweep):\n")
    print("\n".join(phases_lines))
    print(f"\noutcome: {'every step as expected' if ok else 'NOT as expected'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(real(Path(sys.argv[1]))))
