from __future__ import annotations

from pathlib import Path

import pytest

from gpulane.record import Row
from gpulane.topology.bandwidth import LineRate
from gpulane.transfers.importers.p2p import parse_p2p
from gpulane.transfers.matrices import aggregate_table, host_table, p2p_matrices
from gpulane.transfers.plot import plot_bandwidth
from gpulane.transfers.points import Point, aggregate_row, to_row

GIB = 1 << 30
PCIE = LineRate(63.008, "PCIe Gen5 x16", "nvml")
NV18 = LineRate(478.125, "NV18", "nvml")


def _us(size: int, gbps: float) -> float:
    return size / (gbps * 1e9) * 1e6


def _host_rows() -> list[Row]:
    rows = []
    for size in (4096, GIB):
        for memory, h2d, d2h in (("pageable", 21.0, 17.0), ("pinned", 55.5, 55.3)):
            rows.append(Point("h2d", "host", "GPU0", memory, size, [_us(size, h2d)]))
            rows.append(Point("d2h", "GPU0", "host", memory, size, [_us(size, d2h)]))
        rows.append(Point("h2d", "host", "GPU0", "pinned", size, [_us(size, 50.0)], True))
        rows.append(Point("d2h", "GPU0", "host", "pinned", size, [_us(size, 49.0)], True))
    for p in rows:
        p.extra.update(numa_node=0, gpu_numa=0, gpu_model="NVIDIA H200")
    return [to_row(p, run_id="r", build="b", link=PCIE) for p in rows]


def _peer_rows() -> list[Row]:
    pts = []
    for peer, uni, bi in ((False, 37.6, 35.0), (True, 394.0, 391.5)):
        for a, b in (("GPU0", "GPU1"), ("GPU1", "GPU0")):
            pts.append((Point("p2p", a, b, "device", GIB, [_us(GIB, uni)], False, peer), peer))
            pts.append((Point("p2p", a, b, "device", GIB, [_us(GIB, bi)], True, peer), peer))
            lat = Point("p2p", a, b, "device", 16, [2.3 if peer else 16.6], False, peer)
            lat.extra["test"] = "latency"
            pts.append((lat, peer))
    return [
        to_row(p, run_id="r", build="b", link=NV18 if peer else PCIE, path="NV18")
        for p, peer in pts
    ]


def test_host_table() -> None:
    text = host_table(_host_rows(), "GPU0")
    assert "Host <-> GPU0 (NVIDIA H200), PCIe Gen5 x16: 63.01 GB/s per direction" in text
    assert "host memory on NUMA node 0" in text
    line = next(line for line in text.splitlines() if line.strip().startswith("1 GiB"))
    assert "21.00" in line and "17.00" in line and "55.50" in line and "99.00" in line
    assert "efficiency at 1 GiB: pageable h2d 0.33" in text
    assert "pinned h2d 0.88" in text
    assert host_table([], "GPU3") == "# GPU3: no host copies measured"


def test_p2p_matrices_round_trip_through_the_importer() -> None:
    text = p2p_matrices(_peer_rows())
    assert "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)" in text
    assert "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)" in text
    assert "P2P=Enabled Latency (P2P Writes) Matrix (us)" in text
    assert "GPU0 -> GPU1: 394.00 GB/s of NV18 478.12 GB/s = 0.82" in text
    back = parse_p2p(text, "own.txt")
    # The text states no peer access per pair: enabled rows say unknown (None).
    ok = [r for r in back if r.status == "ok"]
    on = [r for r in ok if r.extra["p2p_requested"] and not r.bidirectional and r.algbw_gbps]
    assert {(r.src, r.dst): r.algbw_gbps for r in on} == {
        ("GPU0", "GPU1"): 394.0,
        ("GPU1", "GPU0"): 394.0,
    }
    assert {r.peer_access for r in on} == {None}
    bi = [r for r in ok if r.bidirectional and r.extra["p2p_requested"]]
    assert bi[0].algbw_gbps == pytest.approx(783.0, abs=0.01)  # the printed sum
    assert bi[0].extra["per_direction_gbps"] == pytest.approx(391.5, abs=0.01)
    lat = [r for r in ok if r.extra.get("test") == "latency" and r.peer_access is False]
    assert {r.time_us for r in lat} == {16.6}
    # gpulane copy prints GPU-timed latency only; the tool's CPU-timed matrices are missing.
    (missing,) = [r for r in back if r.status == "error"]
    assert "missing: the CPU-timer matrix of 'P2P=Disabled Latency Matrix (us)'" in (
        missing.error or ""
    )


def test_aggregate_table() -> None:
    rows = [
        to_row(Point("h2d", "host", g, "pinned", GIB, [_us(GIB, 54.4)]), run_id="r", build="b",
               link=PCIE)
        for g in ("GPU0", "GPU1")
    ]  # fmt: skip
    for r in rows:
        r.extra["test"] = "all-gpus"
    agg = aggregate_row(rows, LineRate(126.016, "sum", "sum"), "all-gpus")
    text = aggregate_table([*rows, agg])
    assert "all GPUs at once, h2d, pinned, 1 GiB each: GPU0 54.40  GPU1 54.40" in text
    assert "total 108.80 GB/s of 126.02 (0.86)" in text
    assert aggregate_table([]) == ""


def test_plot_writes_png(tmp_path: Path) -> None:
    out = plot_bandwidth(_host_rows(), tmp_path / "bw.png")
    assert out is not None and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_bandwidth(_peer_rows(), tmp_path / "none.png") is None
