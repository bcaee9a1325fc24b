"""Capture what gpulane's NVML reader reads, for the test fixtures (run on the GPU machine).

    python benchmarks/accept/capture_nvml.py OUTDIR NAME

writes ``OUTDIR/nvml-NAME.json`` (exactly the structure
:func:`gpulane.topology.gpu_state.capture` returns and :func:`gpu_states` parses: per GPU
its compute processes, their names and utilization samples, clocks event reasons,
temperature, power), ``OUTDIR/smi-q-NAME.txt`` (``nvidia-smi -q -d
PIDS,PERFORMANCE,POWER,TEMPERATURE``) and ``OUTDIR/smi-apps-NAME.txt``
(``nvidia-smi --query-compute-apps=...``), so the parse can be held against what
nvidia-smi printed at the same moment. tests/topology/test_gpu_state.py reads
``tests/fixtures/h200x4/nvml-busy*.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from gpulane.topology.gpu_state import capture, gpu_states


def smi(*args: str) -> str:
    try:
        p = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60)
        return p.stdout + p.stderr
    except OSError as err:
        return f"nvidia-smi: {err}\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: capture_nvml.py OUTDIR NAME", file=sys.stderr)
        return 2
    out, name = Path(argv[0]), argv[1]
    out.mkdir(parents=True, exist_ok=True)
    time.sleep(1.0)  # a full window of process-utilization samples
    raw = capture(window_s=2.0)
    (out / f"nvml-{name}.json").write_text(json.dumps(raw, indent=1, default=str) + "\n")
    (out / f"smi-q-{name}.txt").write_text(smi("-q", "-d", "PIDS,PERFORMANCE,POWER,TEMPERATURE"))
    (out / f"smi-apps-{name}.txt").write_text(
        smi("--query-compute-apps=pid,process_name,used_memory,gpu_bus_id", "--format=csv")
    )
    for s in gpu_states(raw):
        print(
            f"{s.name}: {s.words() or 'nothing else on it; clocks ' + (', '.join(s.reasons) or 'free')}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
