"""Write tests/slow_tests.txt (the order tests/conftest.py starts the long tests in) from
the durations section of a pytest log: ``python -m tests.slow_order LOG [--min S]``.

The log is a run with ``--durations=0`` (or any ``--durations=N``: only the tests it lists
are ordered). Setup, call and teardown of a test are added up; xdist's ``@group`` suffix is
dropped (the conftest orders items before xdist adds it).
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(\S.*?)\s*$")
OUT = Path(__file__).parent / "slow_tests.txt"


def durations(text: str) -> dict[str, float]:
    """Seconds per test node id, from the durations lines of a pytest log."""
    total: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            nodeid = re.sub(r"@[\w-]+$", "", m.group(3))
            total[nodeid] += float(m.group(1))
    return dict(total)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("log", type=Path)
    ap.add_argument("--min", type=float, default=3.0, help="leave out tests shorter than this")
    args = ap.parse_args(argv)
    found = durations(args.log.read_text(errors="replace"))
    kept = sorted(((s, t) for t, s in found.items() if s >= args.min), reverse=True)
    if not kept:
        raise SystemExit(f"slow_order: no durations of {args.min} s or more in {args.log}")
    head = (
        f"# seconds node-id: the tests of {args.log.name} that took {args.min:g} s or more,\n"
        "# longest first (tests/conftest.py starts them first); python -m tests.slow_order LOG\n"
    )
    OUT.write_text(head + "".join(f"{s:.1f} {t}\n" for s, t in kept))
    print(f"slow_order: {len(kept)} tests written to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
