"""Two held-out tables of `heldout4.py` side by side: each split's error before and after
a change of the model (the same measured runs, the advice recomputed).

usage: python benchmarks/advise/compare_rounds.py BEFORE.md AFTER.md

Prints one row per (model, split, batch, input) with the prefill and decode errors of
both, then how many figures each has within 15 %.
"""

from __future__ import annotations

import sys
from pathlib import Path

TARGET = 15.0


def errors(path: Path) -> dict[tuple[str, ...], tuple[float, float]]:
    """(model, split, batch, input) -> (prefill error %, decode error %) of the advice table."""
    out = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 11 or not cells[6].endswith("%") or not cells[9].endswith("%"):
            continue
        out[tuple(cells[:4])] = (float(cells[6].rstrip("%")), float(cells[9].rstrip("%")))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = (errors(Path(a)) for a in argv)
    keys = [k for k in after if k in before]
    if not keys:
        print("no (model, split, batch, input) in both tables", file=sys.stderr)
        return 1
    print("| model (layers) | split | batch | input | prefill err before | after | "
          "decode err before | after |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for k in keys:
        (pb, db), (pa, da) = before[k], after[k]
        print(f"| {' | '.join(k)} | {pb:+.0f}% | {pa:+.0f}% | {db:+.0f}% | {da:+.0f}% |")
    n = 2 * len(keys)
    ok_b = sum(abs(e) <= TARGET for k in keys for e in before[k])
    ok_a = sum(abs(e) <= TARGET for k in keys for e in after[k])
    print(f"\n# within 15%: before {ok_b} of {n}, after {ok_a} of {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
