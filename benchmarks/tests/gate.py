"""Mutation testing as a gate on gpulane's core: mutmut over each kept-core module, its
score against the one recorded in ``benchmarks/tests/mutation.json``.

    python -m benchmarks.tests.gate                 # every target; exit 1 if a score drops
    python -m benchmarks.tests.gate --only spec     # some targets (comma-separated)
    python -m benchmarks.tests.gate --fast          # the targets CI runs (FAST)
    python -m benchmarks.tests.gate --record        # write the scores measured now
    python -m benchmarks.tests.gate --survivors     # list survivors without a recorded why

Each target runs in a scratch copy of the repository (mutmut 3 mutates in place under
``mutants/``), with only the tests that exercise that module, so that a target takes
seconds to minutes instead of the whole suite per mutant, and through ``collected.py``
(mutmut with those tests collected once; ``--plain``: a new pytest.main per mutant, as
mutmut runs them; the same verdicts). A mutant counts as:

- killed: a selected test failed, timed out or crashed with it;
- equivalent: listed under the target's ``equivalent`` in mutation.json with why (the
  mutated code behaves the same; e.g. ``max(a, 0)`` vs ``max(a, -1)`` where ``a >= 0``);
- survived: everything else, including mutants no selected test reaches.

score = killed / (all - equivalent). The gate fails when a target's score is below its
recorded one, or when a recorded equivalent mutant no longer exists (the code changed:
review the list). ``--keep DIR --reuse`` scores kept runs again without running mutmut
(after editing the equivalent list). Mutant names (``module.x_function__mutmut_N``) are mutmut's; they stay
the same while the function's code does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = Path(__file__).resolve().parent / "mutation.json"

KILLED = {1, 3, 24, -24, 36, 152, 255, -11, -9, 37}  # failed, crashed, timed out, type error
SURVIVED = {0}
NO_TESTS = {5, 33}


@dataclass(frozen=True)
class Target:
    name: str
    modules: tuple[str, ...]  # files mutated
    tests: tuple[str, ...]  # pytest selection
    functions: tuple[str, ...] = ()  # mutant-name globs; empty: every function
    note: str = ""


# the nccl-tests text table: its columns and tokens (table.py), the reader of its lines (text.py)
NT = "gpulane.collectives.nccl_tests"
TARGETS = [
    Target(
        "spec",
        ("gpulane/collectives/spec.py",),
        (
            "tests/collectives/test_spec.py",
            "tests/collectives/test_spec_against_fixtures.py",
            "tests/collectives/test_pattern.py",
        ),
    ),
    Target(
        "pattern",
        ("gpulane/collectives/pattern.py", "gpulane/collectives/values.py"),
        ("tests/collectives/test_pattern.py",),
    ),
    Target(
        "nccl-tests-table",
        ("gpulane/collectives/nccl_tests/table.py", "gpulane/collectives/nccl_tests/text.py"),
        (
            "tests/collectives/nccl_tests/test_table.py",
            "tests/collectives/nccl_tests/test_text.py",
            "tests/collectives/nccl_tests/test_logs.py",
            "tests/collectives/nccl_tests/test_table_cuts.py",
            "tests/collectives/nccl_tests/test_table_whole.py",
            "-k",
            "not fuzz",
        ),
        # mutmut 3 names a function's mutants module.x_<function>__mutmut_N and a method's
        # module.xǁ<Class>ǁ<method>__mutmut_N; "__mutmut_" ends the name, so that x_take
        # does not also take x_take_whole
        functions=tuple(
            f"{NT}.{f}__mutmut_*"
            for f in (
                *(
                    f"table.x_{fn}"
                    for fn in (
                        "to_int",
                        "finite",
                        "_uint",
                        "_int",
                        "_word",
                        "_float",
                        "_float_or_na",
                        "_count_or_na",
                        "_date",
                        "_clock",
                        "_accept",
                        "parse_columns",
                        "table_start",
                        "take_whole",
                        "take",
                        "measurements",
                    )
                ),
                "text.xǁTextReaderǁ_table_line",
                "text.xǁTextReaderǁ_emit",
                "text.xǁTextReaderǁ_close_pending",
            )
        ),
        note="the text table: columns, tokens, values of a table line",
    ),
    Target(
        "topo_matrix",
        ("gpulane/topology/topo_matrix.py",),
        (
            "tests/topology/test_topo_matrix.py",
            "tests/topology/test_paths.py",
            "tests/topology/test_build.py",
            "tests/topology/test_model.py",
            "tests/topology/test_captures.py",
        ),
    ),
    Target(
        "paths",
        ("gpulane/topology/paths.py",),
        ("tests/topology/test_paths.py", "tests/topology/test_model.py"),
    ),
    Target(
        "rules",
        tuple(
            f"gpulane/analysis/rules/{m}.py"
            for m in (
                "checks",
                "evaluate",
                "linerate",
                "load",
                "model",
                "outliers",
                "row_checks",
                "select",
                "subjects",
                "threshold",
                "topology_checks",
            )
        ),
        ("tests/analysis/rules",),
    ),
]
# the statistics every backend's rows share, and the copy timer's per-copy arithmetic
# (two planted bugs survived before these targets: p99 as percentile(.., 90), and a copy
# time divided by the wrong number of repetitions)
TARGETS += [
    Target(
        "harness-stats",
        ("gpulane/collectives/harness.py",),
        ("tests/collectives/test_harness.py",),
        functions=tuple(
            f"gpulane.collectives.harness.x_{fn}__mutmut_*" for fn in ("percentile", "summarize")
        ),
        note="percentile and a point's summary (mean, p50, p99, bandwidths)",
    ),
    Target(
        "copy-reps",
        ("gpulane/transfers/measure.py",),
        ("tests/transfers/test_measure.py",),
        functions=("gpulane.transfers.measure.x_per_copy_us__mutmut_*",),
        note="one copy's time from a sample of reps copies (the timer itself needs a GPU)",
    ),
]
FAST = ("spec", "pattern", "paths")  # under a minute each on a 2-core VM: what CI runs


@dataclass
class Result:
    name: str
    counts: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def score(self) -> float:
        judged = self.total - len(self.equivalent)
        return self.counts["killed"] / judged if judged else 1.0


TIMEOUT_MULTIPLIER = 5


def _config(t: Target) -> str:
    def arr(items: tuple[str, ...] | list[str]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["gpulane"]\n'
        f"only_mutate = {arr(t.modules)}\n"
        f"pytest_add_cli_args_test_selection = {arr(t.tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x", "--timeout", "120"]\n'
        "use_git_change_detection = false\n"
        # A mutant's limit is (its tests' clean seconds + 1) x this x 2 CPU-s. At mutmut's
        # 15 a mutant that never ends (pattern's loops over CHUNK) spun ~16 s of wall and
        # CPU before it counted as killed; its tests take a fraction of a second clean, so
        # 5 still lets a mutant run 5 times its tests' time plus 10 s before it is killed
        f"timeout_multiplier = {TIMEOUT_MULTIPLIER}\n"
    )


# Beside gpulane and tests in the scratch copy: the runner that runs mutmut there (the
# tests import no benchmarks module; tests/forked_cli.py has its own copy of what
# benchmarks/forked_run.py does).
SHARED: tuple[str, ...] = (
    "benchmarks/__init__.py",
    "benchmarks/tests/__init__.py",
    "benchmarks/tests/collected.py",
)
# mutmut with the target's tests collected once (collected.py); --plain: mutmut as it is,
# a new pytest.main per mutant (same verdicts, about N times the CPU: README.md)
RUNNER = ("-m", "benchmarks.tests.collected")
PLAIN = ("-m", "mutmut")


def _workspace(t: Target, base: Path) -> Path:
    ws = base / t.name
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    shutil.copytree(ROOT / "gpulane", ws / "gpulane", ignore=ignore)
    shutil.copytree(ROOT / "tests", ws / "tests", ignore=ignore)
    for shared in SHARED:
        (ws / shared).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / shared, ws / shared)
    text = (ROOT / "pyproject.toml").read_text()
    (ws / "pyproject.toml").write_text(text + _config(t))
    return ws


def run_target(
    t: Target,
    base: Path,
    children: int,
    recorded: dict[str, object],
    reuse: bool = False,
    plain: bool = False,
) -> Result:
    ws = base / t.name
    started = time.monotonic()
    if reuse and (ws / "mutants").is_dir():  # score a kept run again (after --keep)
        proc = subprocess.CompletedProcess([], 0, "", "")
    else:
        ws = _workspace(t, base)
        env = {**os.environ, "PYTHONPATH": str(ws)}
        cmd = [sys.executable, *(PLAIN if plain else RUNNER), "run"]
        cmd += ["--max-children", str(children)]
        cmd += list(t.functions)
        proc = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True)
    res = Result(t.name, seconds=time.monotonic() - started)
    metas = list((ws / "mutants").rglob("*.py.meta"))
    if proc.returncode != 0 and not metas:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise SystemExit(f"gate: mutmut failed for {t.name}:\n{tail}")
    equivalent = dict(recorded.get("equivalent", {}))  # type: ignore[call-overload]
    prefixes = tuple(f.rstrip("*") for f in t.functions)
    for meta in metas:
        data = json.loads(meta.read_text())
        for key, code in data["exit_code_by_key"].items():
            if prefixes and not key.startswith(prefixes):
                continue
            res.keys.add(key)
            if code in KILLED:
                res.counts["killed"] += 1
            elif code in NO_TESTS:
                res.counts["no tests"] += 1
            elif code in SURVIVED:
                res.counts["survived"] += 1
            else:
                res.counts[f"other ({code})"] += 1
            if code not in KILLED:
                if key in equivalent:
                    res.equivalent.append(key)
                else:
                    res.survivors.append(key)
    return res


def _load() -> dict[str, dict[str, object]]:
    return json.loads(RECORD.read_text()) if RECORD.exists() else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--only", default="", help="target names, comma-separated")
    ap.add_argument("--fast", action="store_true", help=f"only {', '.join(FAST)}")
    ap.add_argument("--record", action="store_true", help="write the scores measured now")
    ap.add_argument("--survivors", action="store_true", help="print every survivor")
    ap.add_argument("--children", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--keep", help="keep the scratch copies under this directory")
    ap.add_argument(
        "--reuse", action="store_true", help="with --keep: score the kept runs, run nothing"
    )
    ap.add_argument(
        "--plain", action="store_true", help="plain mutmut: a new pytest.main per mutant"
    )
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or (list(FAST) if args.fast else [])
    targets = [t for t in TARGETS if not names or t.name in names]
    unknown = set(names) - {t.name for t in TARGETS}
    if unknown:
        ap.error(
            f"unknown target {', '.join(sorted(unknown))}; known: {', '.join(t.name for t in TARGETS)}"
        )
    record = _load()
    failed = False
    base = Path(args.keep or tempfile.mkdtemp(prefix="gpulane-mutation-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        for t in targets:
            rec = record.get(t.name, {})
            res = run_target(t, base, args.children, rec, reuse=args.reuse, plain=args.plain)
            if args.reuse and args.record and rec.get("seconds"):
                res.seconds = float(rec["seconds"])  # type: ignore[arg-type]
            want = float(rec.get("score", 0.0))  # type: ignore[arg-type]
            # a recorded equivalent mutant that no longer exists: the code changed, review
            stale = sorted(set(rec.get("equivalent", {})) - res.keys)  # type: ignore[call-overload]
            counts = ", ".join(f"{k} {v}" for k, v in sorted(res.counts.items()))
            print(
                f"{t.name}: {res.total} mutants ({counts}), {len(res.equivalent)} equivalent, "
                f"score {res.score:.3f} (recorded {want:.3f}), {res.seconds:.0f} s"
            )
            why = rec.get("survivors", {})
            for key in res.survivors:
                if args.survivors or key not in why:  # type: ignore[operator]
                    print(f"  survived: {key}" + ("" if key in why else "  (no why recorded)"))  # type: ignore[operator]
            if stale:
                print(f"  recorded equivalent mutants that no longer exist: {', '.join(stale)}")
            if args.record:
                rec = dict(rec)
                rec.update(
                    score=round(res.score, 4),
                    mutants=res.total,
                    counts=dict(sorted(res.counts.items())),
                    seconds=round(res.seconds),
                    survivors={k: why.get(k, "") for k in res.survivors},  # type: ignore[attr-defined]
                )
                record[t.name] = rec
            elif round(res.score, 4) < want or stale:
                print(f"  FAIL: {t.name} dropped below its recorded score or its list is stale")
                failed = True
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    if args.record:
        RECORD.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
