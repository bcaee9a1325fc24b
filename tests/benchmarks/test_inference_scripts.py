"""The GPU benchmark scripts' logic on a CPU, before the one GPU call that runs them:
profile_decode.py's dry run on the tiny model, and step_ratio.py on its output and on the
committed H200 rows (TP=2 on NVLink, with the collectives timed on the fixture sweep)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.archive import real

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "inference"
# the 2xH200 run: builds/ on disk, the rest packed as h200x2.zip (benchmarks/archive.py)
H200 = real(BENCH / "h200x2")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def test_profile_dry_run_and_the_ratio_table(tmp_path: Path) -> None:
    out = tmp_path / "profile"
    done = _run(str(BENCH / "profile_decode.py"), "--model", "tiny", "--batch", "1,2",
                "--input-len", "16", "--steps", "2", "--variants", "eager:bmm,eager:nosuch",
                "--prefill", "16", "--device", "cpu", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads((out / "profile.json").read_text())
    ok = [d for d in doc["decode"] if "error" not in d]
    assert [(d["batch"], d["variant"]) for d in ok] == [(1, "eager:bmm"), (2, "eager:bmm")]
    # a variant that fails is kept as its error; the others' figures are there
    assert [d["variant"] for d in doc["decode"] if "error" in d] == ["eager:nosuch"] * 2
    assert doc["prefill"][0]["input_len"] == 16 and doc["prefill"][0]["ttft_ms"] > 0
    assert set(doc["gemm_only_ms"]) == {"1", "2"}
    (tmp_path / "copy_bw.json").write_text(
        json.dumps({"copy_gbps_read_plus_write_median": 4000.0, "matmul_bf16_tflops_median": 700.0})
    )
    done = _run(str(BENCH / "step_ratio.py"), str(tmp_path), "--md", str(tmp_path / "t.md"))
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "t.md").read_text()
    assert "| tiny | 1 | 2 | decode (in 16) | eager:bmm |" in table
    assert "| tiny | 1 | 1 | prefill (in 16) | eager:sdpa |" in table


def test_profile_of_one_tp_rank_slice_on_one_device(tmp_path: Path) -> None:
    """--tp 2: rank 0's slices of a TP=2 stage, collectives off; its roofline is that
    slice's bytes (under TP=1's), and the document says which TP (and PDL) it was."""
    docs = {}
    for tp in (1, 2):
        out = tmp_path / f"tp{tp}"
        done = _run(str(BENCH / "profile_decode.py"), "--model", "tiny", "--batch", "1",
                    "--input-len", "16", "--steps", "2", "--variants", "eager:bmm",
                    "--device", "cpu", "--tp", str(tp), "--out", str(out))  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        docs[tp] = json.loads((out / "profile.json").read_text())
    assert (docs[1]["tp"], docs[2]["tp"]) == (1, 2) and docs[2]["pdl"] is False
    (one,), (two,) = docs[1]["decode"], docs[2]["decode"]
    assert "error" not in two and two["step_ms"] > 0
    assert 0 < two["roofline_ms"] < one["roofline_ms"]


def test_ratio_of_the_committed_tp2_step_with_measured_collectives(tmp_path: Path) -> None:
    rates = json.loads((H200 / "copy_bw.json").read_text())
    rates["matmul_bf16_tflops_median"] = 700.0
    (tmp_path / "copy_bw.json").write_text(json.dumps(rates))
    shutil.copytree(H200 / "builds" / "20261122-032835-nvlink-2755", tmp_path / "tp2" / "run")
    (tmp_path / "sweep" / "run").mkdir(parents=True)
    shutil.copy(ROOT / "tests/fixtures/advise/nvlink-rows.jsonl", tmp_path / "sweep/run/rows.jsonl")
    done = _run(str(BENCH / "step_ratio.py"), str(tmp_path), "--rows", str(tmp_path / "r.jsonl"))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    dec = next(r for r in rows if r["op"] == "decode" and r["batch"] == 1 and r["tp"] == 2)
    # 65 all-reduces of 8 KiB and the logits all-gather, on the graph curve: 0.3-0.6 ms
    assert 0.3 < dec["collectives_ms"] < 0.6
    assert dec["measured_ms"] == 4.533 and dec["met"] is False  # the eager step, before
    assert dec["ratio"] == round(4.533 / (dec["roofline_ms"] + dec["collectives_ms"]), 3)


def test_heldout_table_on_the_committed_8b_rows(tmp_path: Path) -> None:
    """heldout.py end to end on real rows: the 8B calibration runs, the NVLink sweep
    fixture and the 8B TP=2 / PP=2 runs on NVLink, predicting 8B itself (the held-out
    models need the GPU run): the figures of benchmarks/advise/README.md, all within 15 %,
    and TP=2 recommended and measured best at batch 1 and 16."""
    (tmp_path / "calib").mkdir()
    shutil.copytree(H200 / "tp1", tmp_path / "calib" / "tp1")
    shutil.copytree(H200 / "builds" / "20261122-032835-nvlink-2755", tmp_path / "calib" / "tp2")
    (tmp_path / "coll" / "run").mkdir(parents=True)
    shutil.copy(ROOT / "tests/fixtures/advise/nvlink-rows.jsonl", tmp_path / "coll/run/rows.jsonl")
    shutil.copytree(H200 / "builds", tmp_path / "runs")
    done = _run(str(ROOT / "benchmarks/advise/heldout.py"), str(tmp_path), "--builds", "nvlink",
                "--held-out", "llama3-8b", "--md", str(tmp_path / "t.md"))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / "t.md").read_text()
    # the same figures as predict_vs_measured.py gives (benchmarks/advise/README.md)
    assert "| nvlink | llama3-8b (32) | TP=2 | 1 | 59851 | 58113 | +3% | 232 | 221 | +5% |" in text
    assert "# within 15%: 8 of 8 figures; recommendation right in 4 of 4 cases" in text
    assert text.count("| TP=2 | TP=2 | yes |") == 4


def test_round4_table_sets_before_and_after_side_by_side(tmp_path: Path) -> None:
    """decode_round4.py on the committed 8B TP=2 rows (before) and the same rows as a
    gemv run would write them (after, 20 % faster; one batch-1 run whose kernels failed):
    the same roofline and collectives on both sides, each side's ratios and kernels."""
    rates = json.loads((H200 / "copy_bw.json").read_text())
    (tmp_path / "copy_bw.json").write_text(json.dumps(rates))
    (tmp_path / "sweep2" / "run").mkdir(parents=True)
    shutil.copy(
        ROOT / "tests/fixtures/advise/nvlink-rows.jsonl", tmp_path / "sweep2/run/rows.jsonl"
    )
    before = (H200 / "builds" / "20261122-032835-nvlink-2755" / "rows.jsonl").read_text()
    rows = [json.loads(x) for x in before.splitlines() if x.strip()]
    after, failed = [], []
    for r in rows:
        if r["op"] != "decode":
            continue
        a = json.loads(json.dumps(r))
        a["time_us"] *= 0.8
        a["extra"].update(decode_kernels="gemv", kernels_per_layer=6, compile=True)
        a["extra"]["compute_only_ms"] *= 0.8
        a["started_at"] = "z"  # run after the before
        after.append(a)
        if r["batch"] == 1:
            f = json.loads(json.dumps(r))
            f["extra"].update(decode_kernels="gemv", gemv_error="RuntimeError: no", compile=True)
            failed.append(f)
    for name, part in (("before", rows), ("after", after), ("failed", failed)):
        (tmp_path / "decode" / name).mkdir(parents=True)
        text = "".join(json.dumps(r) + "\n" for r in part)
        (tmp_path / "decode" / name / "rows.jsonl").write_text(text)
    done = _run(str(BENCH / "decode_round4.py"), str(tmp_path), "--rows", str(tmp_path / "r.jsonl"))
    assert done.returncode in (0, 1), done.stderr
    figs = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(figs) == 5
    by = {(f["batch"], f["kernels_used"]): f for f in figs}
    for b in (1, 16):
        old, new = by[(b, "compiled")], by[(b, "gemv")]
        assert new["roofline_ms"] == old["roofline_ms"] > 0
        assert new["collectives_ms"] == old["collectives_ms"] > 0
        assert abs(new["measured_ms"] - old["measured_ms"] * 0.8) < 0.002
        assert new["ratio"] == round(
            new["measured_ms"] / (new["roofline_ms"] + new["collectives_ms"]), 3
        )
        assert (old["kernels_per_layer"], new["kernels_per_layer"]) == (20, 6)  # eager before
        co = new["compute_ratio"] * new["roofline_ms"]
        assert (
            abs(new["floor_us_per_kernel"] - (co - new["roofline_ms"]) / (6 * 32 + 3) * 1e3) < 0.1
        )
    missed = any(
        f["ratio"] > 1.2 or f["compute_ratio"] > 1.3 for f in figs if f["kernels_used"] == "gemv"
    )
    assert done.returncode == (1 if missed else 0)
    assert by[(1, "gemv failed")]["error"] == "RuntimeError: no"
    lines = [x for x in done.stdout.splitlines() if x.startswith("| llama3-8b (32) | 2 | 1 |")]
    assert [x.split("|")[4].strip() for x in lines] == ["compiled", "gemv", "gemv failed"]
    assert "- llama3-8b TP=2: RuntimeError: no" in done.stdout
