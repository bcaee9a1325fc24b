"""Peak memory and time of `gpulane parse` for the copy-tool and vLLM importers on large
files: real captures repeated until the file reaches each size.

    python benchmarks/parse/importers_memory.py [--sizes 10,100] [--formats nvbandwidth,...]

Each parse runs as its own process (`gpulane parse FORMAT FILE --json --out DIR`, stdout to
/dev/null); peak RSS is that process's ru_maxrss. Memory must not grow with the file.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "tests" / "fixtures" / "public"
SOURCES = {
    # format -> (capture, the part that may repeat: from this marker to the end)
    "nvbandwidth": (PUBLIC / "bandwidthtest/llmaction_8xH800_nvbandwidth_v0.2_all_tests.txt",
                    "Running "),
    "bandwidthtest": (PUBLIC / "bandwidthtest/stelline_asus_rtx6000ada_bandwidthTest_dev0.txt",
                      "[CUDA Bandwidth Test]"),
    "vllm": (PUBLIC / "vllm/vllm_readme_benchmark_serving_sharegpt_10prompts.txt", "="),
}  # fmt: skip


def make_file(fmt: str, megabytes: int, folder: Path) -> Path:
    capture, marker = SOURCES[fmt]
    text = capture.read_text()
    head, body = text[: text.index(marker)], text[text.index(marker) :]
    path = folder / f"{fmt}-{megabytes}MB.txt"
    with open(path, "w") as fh:
        fh.write(head)
        written = len(head)
        while written < megabytes << 20:
            fh.write(body)
            written += len(body)
    return path


def measure(fmt: str, path: Path, out: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS in MiB, rows) of one parse in a child process."""
    start = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        subprocess.run(
            [sys.executable, "-m", "gpulane.cli", "parse", fmt, str(path), "--json",
             "--out", str(out)],
            stdout=devnull, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    with open(out / "rows.jsonl") as fh:
        rows = sum(1 for _ in fh)
    return seconds, peak, rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,100", help="file sizes in MB")
    ap.add_argument("--formats", default=",".join(SOURCES))
    args = ap.parse_args()
    print("| format | file MB | rows | seconds | peak RSS MiB |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats.split(","):
            for mb in (int(s) for s in args.sizes.split(",")):
                path = make_file(fmt, mb, Path(tmp))
                # ru_maxrss of children is the largest so far: measure each in a fresh child
                done = subprocess.run(
                    [sys.executable, __file__, "--one", fmt, str(path), str(Path(tmp) / f"o{fmt}{mb}")],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                seconds, peak, rows = done.stdout.split()
                size = path.stat().st_size / 1e6
                print(f"| {fmt} | {size:.0f} | {rows} | {float(seconds):.1f} | {float(peak):.0f} |")
                path.unlink()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--one":
        s, p, n = measure(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
        print(f"{s} {p} {n}")
    else:
        main()
