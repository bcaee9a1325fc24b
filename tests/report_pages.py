"""The inputs of the page tests (and of benchmarks/report/make_pages.py, which keeps their
screenshots): the recorded 2×H200 builds as committed, and 100 synthetic runs.

Recorded builds (nvlink, pcie-host, socket), one directory each, as a user would gather
them: the token and torch collective runs of ``benchmarks/inference/h200x2/builds``, the
nccl-tests all_reduce log of ``benchmarks/collectives/h200x2`` imported with the real
``gpulane parse nccl-tests``, and the topology ``gpulane accept`` recorded on the machine
(``benchmarks/accept/h200x2``; pcie-host is the same box, so nvlink's).
"""

from __future__ import annotations

import math
import random
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gpulane.record import Row
from tests.analysis.fixture_rows import write_run
from tests.helpers import gpulane

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
BUILDS = ("nvlink", "pcie-host", "socket")
NCCL_TESTS_LOG = {
    "nvlink": "nt-all_reduce-float.txt",
    "pcie-host": "nt-all_reduce-pcie-host.txt",
    "socket": "nt-all_reduce-socket.txt",
}
TOPOLOGY = {"nvlink": "nvlink", "pcie-host": "nvlink", "socket": "socket"}


def recorded_builds(dest: Path) -> Path:
    """dest/<build>/ per recorded build; returns dest."""
    for build in BUILDS:
        out = dest / build
        out.mkdir(parents=True, exist_ok=True)
        for run in sorted((BENCH / "inference/h200x2/builds").glob(f"*-{build}-*")):
            shutil.copytree(run, out / run.name)
        log = BENCH / "collectives/h200x2" / NCCL_TESTS_LOG[build]
        proc = gpulane(
            "parse", "nccl-tests", str(log), "--build", build, "--out", str(out / "nccl-tests"),
            cwd=dest,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        topo = BENCH / "accept/h200x2" / TOPOLOGY[build] / "topology.json"
        shutil.copy(topo, out / "topology.json")
    return dest


# Synthetic builds: (name, latency us, busbw GB/s, host copy GB/s, line rate, TP decode factor)
SYNTHETIC = (
    ("nvlink", 7.0, 340.0, 55.0, 63.0, 1.0),
    ("pcie-gen5", 10.0, 27.0, 54.0, 63.0, 0.85),
    ("riser-x4", 14.0, 5.5, 6.8, 7.9, 0.55),
    ("socket", 30.0, 3.9, 55.0, 63.0, 0.35),
)
SIZES = [8 * 4**i for i in range(15)]  # 8 B .. 2 GiB


def synthetic_runs(dest: Path, runs: int = 100, seed: int = 23) -> Path:
    """``runs`` run directories over four builds and three kinds, started over ten days,
    a latency-bandwidth curve per build with noise, a few error rows."""
    rnd = random.Random(seed)
    start = datetime(2026, 11, 1, 8, 0, tzinfo=timezone.utc)
    for i in range(runs):
        build, lat, bw, h2d, line, tp_factor = SYNTHETIC[i % len(SYNTHETIC)]
        kind = ("collective", "copy", "tokens")[(i // len(SYNTHETIC)) % 3]
        run_id = f"run-{i:03d}-{build}"
        when = (start + timedelta(hours=2.4 * i)).isoformat(timespec="seconds")
        common = {"run_id": run_id, "build": build, "host": f"node{i % 7:02d}", "started_at": when}
        noise = 1.0 + rnd.uniform(-0.08, 0.08)
        rows: list[Row] = []
        if kind == "collective":
            nccl = {"transport": "NET/Socket" if build == "socket" else "P2P/CUMEM", "channels": 2}
            for op, factor in (("all_reduce", 1.0), ("all_gather", 0.5)):
                for size in SIZES:
                    for in_place in (False, True):
                        t = lat * noise + size * factor / (bw * noise * 1e3)
                        busbw = size * factor / (t * 1e3)
                        rows.append(
                            Row(
                                kind="collective",
                                backend="torch-nccl",
                                op=op,
                                world_size=8,
                                dtype="bfloat16",
                                redop="sum" if op == "all_reduce" else None,
                                in_place=in_place,
                                size_bytes=size,
                                time_us=t,
                                algbw_gbps=busbw / factor / (2 * 7 / 8)
                                if op == "all_reduce"
                                else busbw,
                                busbw_gbps=busbw,
                                wrong=0,
                                path="NV18" if build == "nvlink" else "SYS",
                                extra={"nccl": nccl},
                                **common,
                            )
                        )
            if i % 13 == 0:
                rows.append(
                    Row(
                        kind="collective",
                        backend="torch-nccl",
                        op="alltoall",
                        world_size=8,
                        status="error",
                        error="rank 3 timed out after 300 s",
                        **common,
                    )
                )
        elif kind == "copy":
            for g in range(8):
                for op in ("h2d", "d2h"):
                    for k, size in enumerate((1 << 20, 1 << 24, 1 << 28, 1 << 30)):
                        value = h2d * noise * (0.6 + 0.1 * k) * (0.93 if g == 5 else 1.0)
                        gpu = f"GPU{g}"
                        rows.append(
                            Row(
                                kind="copy",
                                backend="cuda",
                                op=op,
                                memory="pinned",
                                bidirectional=False,
                                src="host" if op == "h2d" else gpu,
                                dst=gpu if op == "h2d" else "host",
                                size_bytes=size,
                                time_us=size / (value * 1e3),
                                algbw_gbps=value,
                                expected_gbps=line,
                                efficiency=value / line,
                                **common,
                            )
                        )
        else:
            for tp, pp in ((8, 1), (1, 8), (4, 2)):
                for batch in (1, 8, 32):
                    for op in ("prefill", "decode"):
                        split = tp_factor if tp > 1 else 0.9
                        base = 40000.0 if op == "prefill" else 140.0 * math.sqrt(batch) * 4
                        share = (1 - tp_factor) * 0.9 if tp > 1 else 0.0
                        rows.append(
                            Row(
                                kind="tokens",
                                backend="torch-nccl",
                                op=op,
                                world_size=8,
                                model="llama3-8b",
                                tp=tp,
                                pp=pp,
                                batch=batch,
                                input_len=1024,
                                output_len=64,
                                tokens_per_s=base * split * noise,
                                ttft_ms=1024 * batch / (base * split) * 1e3
                                if op == "prefill"
                                else None,
                                comm_share=share,
                                path="NV18" if build == "nvlink" else "SYS",
                                **common,
                            )
                        )
        write_run(dest, rows)
    return dest
