"""The record of a conformance run (benchmarks/gpu/conformance.sh) and its summary.

    python benchmarks/gpu/conformance/summarize.py record FILES_AT KIND   # keep what backs it
    python benchmarks/gpu/conformance/summarize.py summary KIND_DIR       # print summary.md

``record`` takes what one device call brought back (conformance.tar, steps.log,
expect.tsv) and keeps, under ``benchmarks/gpu/conformance/KIND/``: the step log, the
expectations, machine.txt, every accept's accept.json, and the rows (rows.jsonl,
facts.jsonl) of the healthy accept's sweep and copies; rank logs, Parquet copies and pages
stay behind. ``summary`` prints the step table with each fault's failing rows and their
messages, the copy figures of the healthy accept, and the bytes a row takes as written
(facts once per run) against whole rows.
"""

from __future__ import annotations

import csv
import json
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KEEP_TOP = ("steps.log", "expect.tsv", "machine.txt", "summary.md")


def record(files_at: Path, kind: str) -> Path:
    dest = HERE / kind
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(files_at / "conformance.tar") as tar:
        tar.extractall(tmp, filter="data")
        root = Path(tmp)
        for name in KEEP_TOP:
            src = files_at / name if (files_at / name).exists() else root / name
            if src.exists():
                (dest / ("device-summary.md" if name == "summary.md" else name)).write_bytes(
                    src.read_bytes()
                )
        for doc in sorted(root.glob("runs/*/accept.json")):
            step = "-".join(doc.parent.name.split("-")[2:-1])  # <date>-<time>-<build>-<id>
            (dest / f"accept-{step}.json").write_bytes(doc.read_bytes())
            if step != "healthy":
                continue
            for rows in sorted(doc.parent.glob("*/rows.jsonl")):
                kind_of = json.loads(rows.read_text().splitlines()[0]).get("kind") or "collective"
                if (rows.parent / "facts.jsonl").exists():
                    facts = json.loads((rows.parent / "facts.jsonl").read_text().splitlines()[0])
                    kind_of = facts["row"].get("kind", kind_of)
                out = dest / f"healthy-{kind_of}"
                out.mkdir(exist_ok=True)
                for name in ("rows.jsonl", "facts.jsonl"):
                    if (rows.parent / name).exists():
                        (out / name).write_bytes((rows.parent / name).read_bytes())
        # the default job's sweep (`gpulane` with no arguments): collective rows
        for rows in sorted(root.glob("runs/*/rows.jsonl")):
            facts = rows.parent / "facts.jsonl"
            if facts.exists() and '"kind":"collective"' in facts.read_text():
                out = dest / "default-collective"
                out.mkdir(exist_ok=True)
                for name in ("rows.jsonl", "facts.jsonl"):
                    (out / name).write_bytes((rows.parent / name).read_bytes())
                break
    return dest


def _steps(kind_dir: Path) -> list[dict[str, str]]:
    with open(kind_dir / "expect.tsv", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _failing(kind_dir: Path, step: str) -> list[str]:
    doc = kind_dir / f"accept-{step}.json"
    if not doc.exists():
        return []
    checks = json.loads(doc.read_text(encoding="utf-8"))["checks"]
    return [
        f"  - `{c['rule']}` {c.get('subject') or '-'}: {c.get('message')}"
        for c in checks
        if c["status"] == "fail"
    ]


def _row_bytes(run_dir: Path) -> tuple[int, float, float]:
    """Rows, bytes a row as written (rows.jsonl + facts.jsonl), bytes a whole row."""
    from gpulane.record import read_rows

    rows = list(read_rows(run_dir / "rows.jsonl"))
    written = sum((run_dir / n).stat().st_size for n in ("rows.jsonl", "facts.jsonl")
                  if (run_dir / n).exists())  # fmt: skip
    whole = sum(len(json.dumps(r.to_dict(), default=str)) + 1 for r in rows)
    return len(rows), written / len(rows), whole / len(rows)


def summary(kind_dir: Path) -> str:
    from gpulane.record import read_rows

    lines = ["| step | exit | expected | cause in the failing row |", "|---|---|---|---|"]
    faults = []
    for s in _steps(kind_dir):
        lines.append(f"| {s['step']} | {s['exit']} | {s['expected']} | {s['cause']} |")
        failing = _failing(kind_dir, s["step"])
        if s["expected"] != "0" and failing:
            faults += [f"- {s['step']}:", *failing]
    bad = [s["step"] for s in _steps(kind_dir) if s["exit"] != s["expected"] or s["cause"] == "no"]
    lines += ["", "not as expected: " + (", ".join(bad) if bad else "none"), ""]
    lines += ["Failing rows of each fault:", "", *faults, ""]
    copies = kind_dir / "healthy-copy" / "rows.jsonl"
    if copies.exists():
        lines += ["| copy (healthy accept), 1 GiB | GB/s | link |", "|---|---|---|"]
        for r in read_rows(copies):
            if r.size_bytes == 1 << 30 and r.op in ("h2d", "d2h"):
                link = r.extra.get("link") or "-"
                lines.append(
                    f"| {r.op} {r.extra.get('gpu_model', '')} | {r.algbw_gbps:.2f} | {link} |"
                )
        lines.append("")
    lines += ["| rows of | rows | bytes a row, as written | bytes a whole row |",
              "|---|---|---|---|"]  # fmt: skip
    for sub in sorted([*kind_dir.glob("default-*"), *kind_dir.glob("healthy-*")]):
        n, written, whole = _row_bytes(sub)
        lines.append(f"| {sub.name} | {n} | {written:.0f} | {whole:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "record":
        print(record(Path(sys.argv[2]), sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "summary":
        sys.stdout.write(summary(Path(sys.argv[2])))
    else:
        sys.exit(__doc__)
