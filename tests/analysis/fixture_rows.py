"""Real-shaped rows and topology for the analysis tests, from the captured fixtures.

nccl-tests tables are read here minimally (data lines only: size, count, type, redop,
root, then time/algbw/busbw/#wrong out-of-place and in-place) so that these tests do not
depend on the real parser. The H200 topology is assembled from ``query-gpu.csv``,
``topo-m.txt``, ``topo-p2p-r.txt`` and ``nvlink-s.txt`` of the same machine.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from gpulane.parquet_rows import write_parquet
from gpulane.record import Row, RowWriter
from tests.helpers import fixture_path

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _num(text: str) -> float | None:
    return None if text.upper() == "N/A" else float(text)


def nccl_rows(
    fixture: str,
    *,
    build: str,
    run_id: str,
    op: str | None = None,
    path: str | None = "NV18",
    host: str = "vm",
    world_size: int = 2,
    env: dict[str, str] | None = None,
) -> list[Row]:
    """One Row per size and variant (out-of-place, in-place) of an nccl-tests table."""
    text = fixture_path(fixture).read_text()
    if op is None:
        m = re.search(r"Collective test starting: (\w+)_perf", text)
        assert m, fixture
        op = m.group(1)
    rows: list[Row] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        tok = line.split()
        if len(tok) != 13 or not tok[0].isdigit():
            continue
        size, count, dtype, redop, root = int(tok[0]), int(tok[1]), tok[2], tok[3], int(tok[4])
        for in_place, (t, alg, bus, wrong) in ((False, tok[5:9]), (True, tok[9:13])):
            w = _num(wrong)
            rows.append(
                Row(
                    run_id=run_id,
                    kind="collective",
                    backend="nccl-tests",
                    op=op,
                    build=build,
                    host=host,
                    world_size=world_size,
                    dtype=dtype,
                    redop=redop,
                    root=root,
                    in_place=in_place,
                    size_bytes=size,
                    count=count,
                    time_us=_num(t),
                    algbw_gbps=_num(alg),
                    busbw_gbps=_num(bus),
                    wrong=None if w is None else int(w),
                    path=path,
                    source=fixture,
                    env=dict(env or {}),
                )
            )
    assert rows, f"no data lines in {fixture}"
    return rows


# Pinned host<->device copies on the H200 machine (DESIGN.md): 55.5 GB/s of a 63 GB/s link.
H2D_PINNED_GBPS = 55.5


def copy_rows(
    *,
    build: str,
    run_id: str,
    gpus: int = 2,
    gbps: dict[str, float] | None = None,
    p2p_gbps: dict[tuple[str, str], float] | None = None,
    host: str = "vm",
    expected: float | None = None,
    sizes: tuple[int, ...] = (1 << 20, 1 << 26, 1 << 28),
) -> list[Row]:
    """h2d/d2h pinned rows per GPU (bandwidth per GPU from ``gbps``, default 55.5 GB/s,
    smaller sizes a little slower) and p2p rows per ordered pair from ``p2p_gbps``."""
    rows: list[Row] = []
    for i in range(gpus):
        name = f"GPU{i}"
        top = (gbps or {}).get(name, H2D_PINNED_GBPS)
        for op in ("h2d", "d2h"):
            for k, size in enumerate(sizes):
                value = top * (0.8 + 0.2 * (k + 1) / len(sizes))
                rows.append(
                    Row(
                        run_id=run_id,
                        kind="copy",
                        backend="cuda",
                        op=op,
                        build=build,
                        host=host,
                        memory="pinned",
                        bidirectional=False,
                        src="host" if op == "h2d" else name,
                        dst=name if op == "h2d" else "host",
                        size_bytes=size,
                        time_us=size / (value * 1e3),
                        algbw_gbps=value,
                        busbw_gbps=value,
                        expected_gbps=expected,
                        efficiency=None if expected is None else value / expected,
                    )
                )
    for (a, b), value in (p2p_gbps or {}).items():
        rows.append(
            Row(
                run_id=run_id,
                kind="copy",
                backend="cuda",
                op="p2p",
                build=build,
                host=host,
                memory="device",
                bidirectional=False,
                src=a,
                dst=b,
                size_bytes=sizes[-1],
                time_us=sizes[-1] / (value * 1e3),
                algbw_gbps=value,
                busbw_gbps=value,
                path="NV18",
            )
        )
    return rows


def tokens_rows(*, build: str, run_id: str, rate: float, host: str = "vm") -> list[Row]:
    out = []
    for tp, pp, scale in ((2, 1, 1.0), (1, 2, 0.7)):
        out.append(
            Row(
                run_id=run_id,
                kind="tokens",
                backend="torch-nccl",
                op="decode",
                build=build,
                host=host,
                model="llama-1b",
                tp=tp,
                pp=pp,
                batch=8,
                input_len=128,
                output_len=128,
                tokens_per_s=rate * scale,
                ttft_ms=20.0 / scale,
            )
        )
    return out


def write_run(root: Path, rows: list[Row], parquet: bool = True) -> Path:
    """A run directory as the producers write it: rows.jsonl (and rows.parquet)."""
    run_dir = root / rows[0].run_id
    with RowWriter(run_dir) as w:
        for r in rows:
            w.write(r)
    if parquet:
        write_parquet(run_dir)
    return run_dir


def h200_topology() -> dict[str, Any]:
    """DESIGN's topology JSON for the 2x H200 machine, from its captured output."""
    gpus = []
    for line in fixture_path("h200x2/query-gpu.csv").read_text().splitlines()[1:]:
        idx, model, bus, gen, gen_max, width, width_max = [x.strip() for x in line.split(",")]
        gpus.append(
            {
                "name": f"GPU{idx}",
                "index": int(idx),
                "bus_id": bus[4:].lower(),
                "model": model,
                "cpu_affinity": None,
                "numa": None,
                "pcie": {
                    "gen": int(gen),
                    "gen_max": int(gen_max),
                    "width": int(width),
                    "width_max": int(width_max),
                    "downtrained": int(gen) < int(gen_max) or int(width) < int(width_max),
                },
                "nvlinks": None,
            }
        )
    topo_lines = [
        ANSI.sub("", x) for x in fixture_path("h200x2/topo-m.txt").read_text().splitlines()
    ]
    header = topo_lines[0].split("\t")
    names = [h.strip() for h in header if re.fullmatch(r"GPU\d+", h.strip())]
    labels: dict[tuple[str, str], str] = {}
    for line in topo_lines[1:]:
        cells = [c.strip() for c in line.split("\t")]
        if not cells or cells[0] not in names:
            continue
        for j, other in enumerate(names):
            labels[(cells[0], other)] = cells[1 + j]
        g = next(g for g in gpus if g["name"] == cells[0])
        g["cpu_affinity"] = cells[1 + len(names)]
        g["numa"] = int(cells[2 + len(names)])
    p2p: dict[tuple[str, str], str] = {}
    for line in fixture_path("h200x2/topo-p2p-r.txt").read_text().splitlines()[1:]:
        cells = [c.strip() for c in ANSI.sub("", line).split("\t") if c.strip()]
        if cells and cells[0] in names:
            for j, other in enumerate(names):
                p2p[(cells[0], other)] = cells[1 + j]
    link_speeds: dict[str, dict[str, float]] = {}
    current = None
    for line in fixture_path("h200x2/nvlink-s.txt").read_text().splitlines():
        m = re.match(r"GPU (\d+):", line)
        if m:
            current = f"GPU{m.group(1)}"
            link_speeds[current] = {}
        m = re.match(r"\s+Link (\d+): ([\d.]+) GB/s", line)
        if m and current:
            link_speeds[current][m.group(1)] = float(m.group(2))
    for g in gpus:
        g["nvlinks"] = link_speeds.get(g["name"]) or None
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            label = labels[(a, b)]
            n = int(label[2:]) if label.startswith("NV") else None
            pairs.append(
                {
                    "a": a,
                    "b": b,
                    "label": label,
                    "kind": "nvlink" if n else label.lower(),
                    "nvlinks": n,
                    "p2p": {"r": p2p[(a, b)]},
                }
            )
    return {"gpus": gpus, "nics": [], "pairs": pairs, "warnings": []}


def downtrained(topology: dict[str, Any], gpu: str, gen: int, width: int) -> dict[str, Any]:
    out = copy.deepcopy(topology)
    for g in out["gpus"]:
        if g["name"] == gpu:
            g["pcie"].update(gen=gen, width=width, downtrained=True)
    out["warnings"].append(
        f"{gpu}: PCIe link at Gen{gen} x{width}, capable of Gen5 x16 (downtrained)"
    )
    return out


def pcie_topology(gen: int = 3, width: int = 16, label: str = "PIX") -> dict[str, Any]:
    """Two GPUs behind one switch (the 2x 2080 Ti fixtures: PIX, Gen3 x16)."""
    gpus = [
        {
            "name": f"GPU{i}",
            "index": i,
            "bus_id": None,
            "model": "NVIDIA GeForce RTX 2080 Ti",
            "pcie": {
                "gen": gen,
                "gen_max": gen,
                "width": width,
                "width_max": width,
                "downtrained": False,
            },
        }
        for i in range(2)
    ]
    pairs = [
        {
            "a": "GPU0",
            "b": "GPU1",
            "label": label,
            "kind": label.lower(),
            "nvlinks": None,
            "p2p": None,
        }
    ]
    return {"gpus": gpus, "nics": [], "pairs": pairs, "warnings": []}
