"""Published PCIe and consumer figures (issue 46): each quoted from its source and checked
against a verbatim copy of it; collectives keyed by GPU model, count, path, P2P state and
NCCL switches; the real 1x H200 Gen5 x16 copy rows read "normal"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpulane.analysis.reference import ReferenceTable, facts_of, judge, reference_lines
from gpulane.analysis.reference.table import Entry, read_table, shipped_tables
from gpulane.analysis.store import frame_from_rows, load_frame
from gpulane.record import Row

ROOT = Path(__file__).resolve().parents[3]
CONF = ROOT / "gpulane/conf/reference"
H200_COPY = ROOT / "benchmarks/gpu/conformance/h200/healthy-copy"
GIB = 1 << 30


def _published() -> list[Entry]:
    return [e for f in ("pcie.yaml", "consumer.yaml") for e in read_table(CONF / f)]


def _pcie_or_consumer(e: Entry) -> bool:
    """A figure of a host link or GPU pair copy, or a collective not over NVLink."""
    return e.origin in ("published", "threshold") and (
        e.kind == "copy" or not e.path.startswith("NV")
    )


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _source(e: Entry) -> str:
    """One source per publication: the URL up to the repository, or the issue."""
    m = re.match(r"https://github\.com/([^/]+/[^/]+)(/(issues|pull)/\d+)?", e.cite)
    return m.group(0) if m else e.cite


def test_at_least_40_figures_from_at_least_8_sources() -> None:
    entries = [e for p in shipped_tables() for e in read_table(p) if _pcie_or_consumer(e)]
    assert len(entries) >= 40, len(entries)
    sources = {_source(e) for e in entries}
    assert len(sources) >= 8, sorted(sources)


@pytest.mark.parametrize("entry", _published(), ids=lambda e: f"{e.source}:{e.op}:{e.low}")
def test_each_figure_quotes_its_source_and_lies_in_its_range(entry: Entry) -> None:
    assert entry.cite.startswith("https://"), entry.cite
    words = entry.quote or entry.conditions
    assert "'" in words or entry.quote, "no quoted line from the source"
    if not entry.quote:
        return
    # the figure itself is in the quote: some number quoted lies in [low, high]
    numbers = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", entry.quote)]
    high = entry.high if entry.high is not None else float("inf")
    assert any(entry.low <= x <= high for x in numbers), (entry.quote, entry.low, high)
    if entry.local_copy:
        copy = _squash((ROOT / entry.local_copy).read_text(encoding="utf-8"))
        for piece in entry.quote.split(" ... "):
            assert _squash(piece) in copy, f"not in {entry.local_copy}: {piece!r}"


def test_consumer_entries_all_have_a_local_copy_of_their_source() -> None:
    for e in read_table(CONF / "consumer.yaml"):
        assert e.quote and e.local_copy and (ROOT / e.local_copy).is_file(), e.source


def test_real_h200_gen5_x16_copy_rows_are_normal_against_published_figures() -> None:
    frame = load_frame([H200_COPY])
    pinned = frame[(frame["memory"] == "pinned") & (frame["size_bytes"] == GIB)]
    assert set(pinned["op"]) >= {"h2d", "d2h"}
    lines = reference_lines(pinned, table=ReferenceTable.load(shipped=True))
    judged = [ln for ln in lines if " h2d " in ln or " d2h " in ln]
    assert judged and all("normal for one H200 on PCIe Gen5 x16" in ln for ln in judged), lines
    assert all("ml-engineering" in ln and "no reference" not in ln for ln in judged)


def _coll(
    gpu: str,
    n: int,
    busbw: float,
    env: dict[str, str],
    path: str | None = "SYS",
    size: int = 2 * GIB,
    run: str = "r",
    transport: str | None = None,
) -> Row:
    return Row(
        run_id=run, kind="collective", backend="nccl-tests", op="all_reduce", build="b",
        world_size=n, size_bytes=size, dtype="float", busbw_gbps=busbw, path=path, env=env,
        versions={"gpu": gpu, "nccl": "2.25.1"}, transport=transport,
    )  # fmt: skip


FIVE = "NVIDIA GeForce RTX 5090"
SWITCHES = {"NCCL_NTHREADS": "256", "NCCL_MIN_NCHANNELS": "8"}


def _verdict(r: Row) -> str:
    table = ReferenceTable.load(shipped=True)
    return judge(float(r.busbw_gbps or 0), facts_of(r), table, "busbw_gbps", "r").text()


def test_collectives_are_keyed_by_gpu_count_and_switches() -> None:
    assert "normal for 8× GeForce RTX 5090" in _verdict(_coll(FIVE, 8, 28.0, SWITCHES))
    assert "BELOW normal for 8× GeForce RTX 5090" in _verdict(_coll(FIVE, 8, 20.0, SWITCHES))
    four = _verdict(_coll(FIVE, 4, 35.0, SWITCHES))
    assert "normal for 4× GeForce RTX 5090" in four and "nccl#1639" in four
    # no figure for 2 GPUs: no reference, the nearest named, never judged against it
    two = _verdict(_coll(FIVE, 2, 30.0, SWITCHES))
    assert two.startswith("30 GB/s: no reference for 2× GeForce RTX 5090")
    assert "nearest: same GPU, other count" in two and "nccl#1639" in two
    # other NCCL switches: another condition, not the same figure
    plain = _verdict(_coll(FIVE, 8, 28.0, {}))
    assert "no reference" in plain and "other NCCL switches" in plain
    # another GPU on the same count: never used, only named as the nearest
    other = _verdict(_coll("NVIDIA GeForce RTX 4090", 8, 28.0, SWITCHES))
    assert "no reference" in other and "other GPU" in other


def test_p2p_state_decides_which_figure_holds() -> None:
    ti = "NVIDIA GeForce RTX 2080 Ti"
    off = _coll(ti, 2, 4.0, {}, path="PIX", size=GIB, transport="SHM/direct/direct")
    assert "normal for 2× GeForce RTX 2080 Ti any path P2P off" in _verdict(off)
    on = _coll(ti, 2, 4.0, {}, path="PIX", size=GIB, transport="P2P/CUMEM")
    assert "no reference" in _verdict(on) and "P2P other" in _verdict(on)
    unknown = _coll(ti, 2, 4.0, {}, path="PIX", size=GIB)
    assert "the rows do not say whether P2P was on" in _verdict(unknown)


def _p2p_copy(gbps: float, path: str, bidirectional: bool, peer: bool = True) -> Row:
    return Row(
        run_id="r", kind="copy", backend="torch", op="p2p", build="b", world_size=1,
        size_bytes=GIB, memory="device", algbw_gbps=gbps, path=path, src="GPU0", dst="GPU1",
        bidirectional=bidirectional, peer_access=peer,
        versions={"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition"},
    )  # fmt: skip


def test_peer_copies_keyed_by_direction_path_and_p2p() -> None:
    table = ReferenceTable.load(shipped=True)

    def text(r: Row) -> str:
        return judge(float(r.algbw_gbps or 0), facts_of(r), table, "algbw_gbps").text()

    assert "normal for a pair of RTX PRO 6000" in text(_p2p_copy(55.0, "NODE", False))
    cross = text(_p2p_copy(45.0, "SYS", False))
    assert "normal for a pair of RTX PRO 6000 Blackwell Workstation Edition on SYS" in cross
    # both directions at once is its own figure: 105 is normal there, above one direction
    assert "normal" in text(_p2p_copy(105.0, "NODE", True))
    assert "both directions" in text(_p2p_copy(105.0, "NODE", True))
    assert "no reference" in text(_p2p_copy(20.0, "NODE", False, peer=False))


def test_every_figure_gets_a_verdict_or_no_reference_with_the_nearest_named() -> None:
    # 1, 2, 4 and 8 GPUs, copies and collectives, machines with and without a figure
    rows: list[Row] = []
    for n in (2, 4, 8):
        for size in (1 << 20, 1 << 26, GIB, 2 * GIB):
            rows.append(_coll(FIVE, n, 28.0, SWITCHES, size=size, run=f"five-{n}"))
    rows += [_p2p_copy(55.0, "NODE", False), _p2p_copy(9.0, "NODE", False)]
    frame = frame_from_rows(rows)
    lines = reference_lines(frame, table=ReferenceTable.load(shipped=True))
    judged = [ln for ln in lines if "no reference" not in ln]
    missing = [ln for ln in lines if "no reference" in ln]
    # 8x and 4x at 1 GiB and 2 GiB have figures; one line per judged figure
    assert len([ln for ln in judged if "GeForce RTX 5090" in ln]) == 4, judged
    # the rest: one line per machine and op (not one per row), each naming the nearest
    assert missing and all("nearest: " in ln for ln in missing), missing
    assert len([ln for ln in missing if "2× GeForce RTX 5090" in ln]) == 1
    # a figure: one run, op, size and path (the two copies of one run are one, their median)
    figures = {(r.run_id, r.op, r.size_bytes, r.path) for r in rows}
    counted = sum(
        int(m.group(1)) for m in (re.search(r"\((\d+) figures?", x) for x in missing) if m
    )
    assert len(judged) + counted == len(figures)


@pytest.mark.parametrize(
    ("version", "held"), [("2.25.1", True), ("2.23.4", True), ("2.28.9", False), ("2.22", False)]
)
def test_nccl_version_band(version: str, held: bool) -> None:
    entry = Entry(
        gpu=(FIVE,), path="*", world_size=8, op="all_reduce", low=26.6, high=29.4,
        source="band", cite="https://example.org", nccl="2.23-2.27",
    )  # fmt: skip
    r = _coll(FIVE, 8, 28.0, {})
    r.versions = {"gpu": FIVE, "nccl": version}
    facts = facts_of(r)
    j = judge(28.0, facts, ReferenceTable([entry]), "busbw_gbps")
    assert (j.status == "normal") is held, j.text()
