"""The advisor (python -m gpulane advise) on published TP-vs-PP results of PCIe builds.

Each case puts one publication's build to the advisor: every GPU on PCIe GENxWIDTH with
no NVLink (what_if), the GPU model from advise.yaml's gpu_specs, its P2P state (p2p=),
the model, dtype and workload (concurrency= is the decode step's batch), and the two arms
it compared (two splits, one split at two GPU counts, or one split with P2P on and off).
Each arm's figure is the advisor's decode tok/s (per GPU where the publication gives per
GPU figures), against the publication's output tok/s. The advisor agrees when it names
the published winner. Where the two published arms differ in something the advisor has
no input for (the engine's version, NCCL's channel settings), the row says which input
decides it, and whether the advisor's pick would stand without it. Collective figures:
from the reference table (gpulane/conf/reference/*.yaml) where it has an all_reduce
figure of the case's GPU and link; else the what_if projection (advise.yaml projection:).

    python3 benchmarks/advise/published/run_cases.py     # writes cases.jsonl and cases.md
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
REFERENCE = ROOT / "gpulane/conf/reference"
sys.path.insert(0, str(ROOT))

from benchmarks import forked_run  # noqa: E402
from benchmarks.advise.published.case_list import CASES  # noqa: E402  (sources quoted)


def advise(args: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "gpulane", "advise", *args, "format=json"]
    forked_run.preload()  # once: each of the 14 runs is then a fork, not a new interpreter
    out = forked_run.run(cmd, ROOT)
    if out.returncode != 0:
        raise SystemExit(f"gpulane advise {' '.join(args)}: {out.stderr.strip()}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _largest_sizes(e: dict[str, Any]) -> int:
    """A sweep's large sizes first (an advisor step's all-reduces are large), then one size."""
    from gpulane.units import parse_size

    size = e.get("size_max") or e.get("size")
    return int(parse_size(str(size))) if size is not None else 0


def reference_allreduce(gpu: str, link: str, gpus: int) -> dict[str, Any] | None:
    """An all_reduce busbw entry of the reference table for this GPU, link (or any PCIe
    path: an entry's ``path: "*"``) and GPU count, with P2P on (an entry's ``p2p`` unset
    or true: the published runs' state); the one over the largest sizes, if any."""
    found = []
    for path, entries in _reference_tables():
        for e in entries:
            if not isinstance(e, dict) or e.get("kind", "collective") != "collective":
                continue
            gpu_names = [str(g) for g in e.get("gpu") or []]
            if not (
                e.get("op") == "all_reduce"
                and any(gpu.lower() in g.lower() for g in gpu_names)
                and int(e.get("world_size") or 0) == gpus
                and (str(e.get("link")) == link if "link" in e else e.get("path") == "*")
                and e.get("p2p") in (None, True)
            ):
                continue
            found.append({**e, "file": path.name})
    return max(found, key=_largest_sizes) if found else None


@functools.cache
def _reference_tables() -> list[tuple[Path, list[Any]]]:
    """Each reference YAML parsed once (it was parsed again for each of the cases)."""
    return [(p, yaml.safe_load(p.read_text()) or []) for p in sorted(REFERENCE.glob("*.yaml"))]


def collective_args(case: dict[str, Any]) -> tuple[list[str], str]:
    """Advisor overrides from a reference all_reduce figure, and where they came from."""
    gen, width = case["link"]
    link = f"PCIe Gen{gen} x{width}"
    ref = reference_allreduce(case["gpu"], link, case["gpus"])
    if ref is None:
        return [], (
            f"no reference all_reduce figure for {case['gpus']}x {case['gpu']} on {link}: projected"
        )
    from gpulane.units import pcie_gbps

    busbw = (float(ref["low"]) + float(ref["high"])) / 2
    eff = busbw / pcie_gbps(gen, width)
    return [f"projection.efficiency.pcie={eff:.3f}"], (
        f"reference {ref['file']}: all_reduce busbw {ref['low']}-{ref['high']} GB/s "
        f"({ref.get('source')})"
    )


def fill(case: dict[str, Any], arm: dict[str, Any]) -> int:
    """The batch an arm holds when the engine fills the KV cache (concurrency: fill), by
    the advisor's own memory model (gpulane.planning.predict.largest_batch)."""
    from gpulane.inference.shapes import packaged_shape
    from gpulane.planning.inputs import advise_dtype_bytes
    from gpulane.planning.predict import Workload, largest_batch

    conf = yaml.safe_load((ROOT / "gpulane/conf/advise.yaml").read_text())
    memory = float(conf["gpu_specs"][case["gpu"]]["memory_gib"])
    wl = Workload(1, case["input_len"], case["output_len"], advise_dtype_bytes(case["dtype"]))
    shape = packaged_shape(case["model"])
    if shape is None:  # a case names a model gpulane packages: a typo is the case file's
        raise SystemExit(f"run_cases: model {case['model']!r} is not one gpulane packages")
    return largest_batch(shape, arm["tp"], arm["pp"], wl, memory)


def arm_figure(case: dict[str, Any], arm: dict[str, Any], extra: list[str]) -> dict[str, Any]:
    """The advisor's decode tok/s (per GPU when the case says) of one arm."""
    gen, width = case["link"]
    gpus = arm.get("gpus", case["gpus"])
    concurrency = arm.get("concurrency", case["concurrency"])
    if concurrency == "fill":
        concurrency = fill(case, arm)
    args = [
        f"model={case['model']}", f"gpus={gpus}", f"gpu={case['gpu']}",
        f"dtype={case['dtype']}", f"what_if=pcie:{gen}x{width}",
        f"p2p={arm.get('p2p', case.get('p2p', 'on'))}", f"concurrency={concurrency}",
        f"input_len={case['input_len']}", f"output_len={case['output_len']}", *extra,
    ]  # fmt: skip
    d = advise(args)
    pred = next((p for p in d["predictions"] if (p["tp"], p["pp"]) == (arm["tp"], arm["pp"])), None)
    if pred is None or not pred["fits"] or pred["decode"] is None:
        return {"tok_s": None, "basis": None}
    tok_s = pred["decode"]["tokens_per_s"] / (gpus if case.get("per_gpu") else 1)
    return {"tok_s": tok_s, "basis": pred["basis"], "concurrency": concurrency}


def too_close(margin: float, basis: dict[str, Any] | None) -> bool:
    """As the advisor's close_call: a margin within what figures of that basis differ by."""
    from gpulane.planning.uncertainty import ExpectedError, too_close_to_call

    err = (basis or {}).get("expected_error")
    return err is not None and too_close_to_call(margin, ExpectedError(**err))


def score(case: dict[str, Any]) -> dict[str, Any]:
    extra, coll_source = collective_args(case)
    a, b = (arm_figure(case, arm, extra) for arm in case["arms"])
    names = [arm["name"] for arm in case["arms"]]
    pa, pb = case["published"]
    row: dict[str, Any] = {k: case[k] for k in ("case", "source", "quote")}
    row.update(
        published_winner=names[0] if pa >= pb else names[1],
        published_ratio=round(pa / pb, 3),
        collectives=coll_source,
    )
    if a["tok_s"] is None or b["tok_s"] is None:
        row.update(advisor_pick=None, predicted_ratio=None, agrees="no: an arm does not fit",
                   deciding_input=case.get("deciding_input"))  # fmt: skip
        return row
    ratio = a["tok_s"] / b["tok_s"]
    row["concurrency"] = [a["concurrency"], b["concurrency"]]
    pick = names[0] if ratio >= 1 else names[1]
    row.update(advisor_pick=pick, predicted_ratio=round(ratio, 3))
    close = too_close(max(ratio, 1 / ratio), a["basis"])
    row["basis"] = (a["basis"] or {}).get("text")
    decides = case.get("deciding_input")
    if pick == row["published_winner"] and not decides:
        agrees = "yes"
    elif decides:
        agrees = f"depends: {decides}"
    elif close:
        agrees = "too close to call at this basis: depends on the engine version and settings"
    else:
        agrees = "no"
    row.update(agrees=agrees, deciding_input=decides, advisor_margin_within_error=close)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| case | published winner | published ratio | advisor pick | predicted ratio | "
        "agrees | collectives |"
    )
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["case"], r["published_winner"], r["published_ratio"], r["advisor_pick"],
                 r["predicted_ratio"], r["agrees"], r["collectives"]]  # fmt: skip
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    same = sum(1 for r in rows if r["advisor_pick"] == r["published_winner"])
    decided = sum(1 for r in rows if r["agrees"] != "no")
    note = (
        "\nratio: the first arm's output tok/s over the second's (per GPU where the case says).\n"
        f"advisor pick = published winner: {same} of {len(rows)}; "
        f"the published winner or the deciding input named: {decided} of {len(rows)}\n"
    )
    return "\n".join(lines) + "\n" + note


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
