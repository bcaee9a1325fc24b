"""The advisor (python -m gpulane advise) on published TP-vs-PP results of PCIe builds.

Each case: the build as a what_if (every GPU on PCIe GENxWIDTH, no NVLink), the GPU model
from advise.yaml's gpu_specs, the model, dtype and workload of the publication, and the
two splits it compared. The advisor's pick between those two is the one with the shorter
predicted request time at the case's batch (same batch: throughput ratio = inverse of the
request-time ratio). Where the published winner turns on something the advisor has no
input for (the engine's version, P2P state), the row says so: agrees = undecidable.

    python3 benchmarks/advise/published/run_cases.py     # writes cases.jsonl and cases.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

CASES: list[dict[str, Any]] = [
    {
        "case": "8x L4, Llama 3.1 70B FP8, vLLM",
        "source": "https://substratus.ai/blog/benchmarking-llama-3.1-70b-on-l4",
        "verified": True,
        "args": [
            "model=llama3-70b",
            "gpus=8",
            "gpu=L4",
            "dtype=fp8",
            "what_if=pcie:4x16",
            "batch=64",
            "input_len=256",
            "output_len=256",
        ],
        "splits": [[2, 4], [4, 2]],  # [tp, pp]: PP4-TP2 vs PP2-TP4
        "published_winner": "TP=2xPP=4",
        "published_ratio": 307.61 / 261.16,  # output tok/s, quoted on the page
        "deciding_input": None,
    },
    {
        "case": "2x RTX 3090, PCIe x8, no P2P, vLLM V0 vs V1",
        "source": "Atrociel/dual-rtx3090-llm-inference-platform "
        "benchmarks/parallelism-comparison.md",
        "verified": False,
        "args": [
            "model=llama3-8b",
            "gpus=2",
            "gpu=RTX 3090",
            "what_if=pcie:4x8",
            "batch=1",
            "input_len=512",
            "output_len=256",
        ],
        "splits": [[1, 2], [2, 1]],
        "published_winner": "PP=2 on vLLM V0, TP=2 on V1",
        "published_ratio": None,
        "deciding_input": "engine version (vLLM V0 vs V1); P2P off (no advisor input)",
    },
    {
        "case": "8x RTX PRO 6000, P2P on vs off",
        "source": "local-inference-lab/rtx6kpro",
        "verified": False,
        "args": [
            "model=llama3-70b",
            "gpus=8",
            "gpu=RTX PRO 6000",
            "what_if=pcie:5x16",
            "batch=1",
            "input_len=512",
            "output_len=256",
        ],
        "splits": [[8, 1], [4, 2]],
        "published_winner": "P2P on (single request), P2P off (100 concurrent)",
        "published_ratio": None,
        "deciding_input": "P2P state: the advisor has no p2p= input yet",
    },
]


def advise(args: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "gpulane", "advise", *args, "format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"gpulane advise {' '.join(args)}: {out.stderr.strip()}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def name(tp: int, pp: int) -> str:
    return f"TP={tp}xPP={pp}"


def score(case: dict[str, Any]) -> dict[str, Any]:
    d = advise(case["args"])
    times = {(p["tp"], p["pp"]): p.get("request_ms") for p in d["predictions"] if p["fits"]}
    (ta, pa), (tb, pb) = case["splits"]
    a, b = times.get((ta, pa)), times.get((tb, pb))
    row: dict[str, Any] = {k: case[k] for k in ("case", "source", "verified")}
    row.update(published_winner=case["published_winner"])
    ratio = case["published_ratio"]
    row["published_ratio"] = None if ratio is None else round(ratio, 3)
    if a is None or b is None:
        row.update(advisor_pick=None, predicted_ratio=None, agrees="undecidable",
                   deciding_input="a split does not fit")  # fmt: skip
        return row
    pick = name(ta, pa) if a <= b else name(tb, pb)
    row["advisor_pick"] = pick
    row["predicted_ratio"] = round(b / a, 3)  # throughput of the first split over the second
    if case["deciding_input"]:
        row.update(agrees="undecidable", deciding_input=case["deciding_input"])
    else:
        row.update(agrees="yes" if pick == case["published_winner"] else "no",
                   deciding_input=None)  # fmt: skip
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = "| case | published winner | published ratio | advisor pick | predicted ratio | agrees | deciding input |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["case"], r["published_winner"], r["published_ratio"], r["advisor_pick"],
                 r["predicted_ratio"], r["agrees"], r["deciding_input"]]  # fmt: skip
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    note = "ratio: throughput of the case's first split over its second (first split: TP=2xPP=4, TP=1xPP=2, TP=8xPP=1)"
    return "\n".join(lines) + "\n\n" + note + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--stdout", action="store_true", help="print the table, write nothing")
    a = ap.parse_args(argv)
    rows = [score(c) for c in CASES]
    if a.stdout:
        sys.stdout.write(table(rows))
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (a.out / "cases.md").write_text(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
