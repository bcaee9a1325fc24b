"""Reference matching: a figure is judged only against an entry for its own machine."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpulane.analysis.reference import ReferenceTable, facts_of, judge, reference_lines
from gpulane.analysis.reference.table import Entry, read_table, shipped_tables
from gpulane.analysis.store import frame_from_rows
from gpulane.record import Row

ROOT = Path(__file__).resolve().parents[3]
GIB = 1 << 30

TABLE = [
    {
        "gpu": ["NVIDIA H200"],
        "path": "NV18",
        "world_size": 4,
        "op": "all_reduce",
        "size_min": "1G",
        "size_max": "4G",
        "low": 345,
        "high": 365,
        "nccl": "2.28",
        "nvls": False,
        "runs": 3,
        "source": "test runs",
        "cite": "tests/here",
    },
    {
        "gpu": ["NVIDIA H100 80GB HBM3"],
        "path": "NV18",
        "world_size": 8,
        "op": "all_reduce",
        "size": "16G",
        "low": 460,
        "origin": "threshold",
        "nvls": True,
        "source": "a health check",
        "cite": "https://example.org/conf",
    },
]


@pytest.fixture
def table(tmp_path: Path) -> ReferenceTable:
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(TABLE))
    return ReferenceTable(read_table(f))


def row(
    n: int,
    busbw: float,
    gpu: str | None = "NVIDIA H200",
    size: int = GIB,
    path: str = "NV18",
    env: dict[str, str] | None = None,
    nccl: str | None = "2.28.9",
    run: str = "r1",
    build: str = "b",
) -> Row:
    versions = {"nccl": nccl} if nccl else {}
    if gpu:
        versions["gpu"] = gpu
    return Row(
        run_id=run,
        kind="collective",
        backend="nccl",
        op="all_reduce",
        build=build,
        world_size=n,
        size_bytes=size,
        dtype="float",
        busbw_gbps=busbw,
        path=path,
        env={"NCCL_NVLS_ENABLE": "0"} if env is None else env,
        versions=versions,
    )


def verdict(r: Row, table: ReferenceTable) -> Any:
    return judge(r.busbw_gbps, facts_of(r), table, "busbw_gbps")


def test_normal_below_above_for_the_same_machine(table: ReferenceTable) -> None:
    j = verdict(row(4, 353), table)
    assert j.status == "normal"
    assert j.text().startswith("353 GB/s, normal for 4× H200 NV18 without NVLS")
    assert "345–365" in j.text() and "3 runs" in j.text() and "tests/here" in j.text()
    assert verdict(row(4, 344), table).status == "below"
    assert "BELOW normal" in verdict(row(4, 344), table).text()
    assert verdict(row(4, 366), table).status == "above"


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_other_world_sizes_have_no_reference(table: ReferenceTable, n: int) -> None:
    j = verdict(row(n, 353), table)
    assert j.entry is None
    assert f"no reference for {n}× H200 NV18 all_reduce 1 GiB" in j.text()


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"gpu": "NVIDIA H100 80GB HBM3"}, "another GPU model"),
        ({"gpu": None}, "GPU model unknown"),
        ({"path": "SYS"}, "another path"),
        ({"size": 64 << 20}, "a size outside the band"),
        ({"env": {"NCCL_NVLS_ENABLE": "1"}}, "NVLS on"),
        ({"env": {"NCCL_NVLS_ENABLE": "0", "NCCL_P2P_DISABLE": "1"}}, "P2P off"),
        ({"nccl": "2.19.3"}, "another NCCL"),
    ],
)
def test_never_judged_against_another_machine_or_condition(
    table: ReferenceTable, changes: dict[str, Any], why: str
) -> None:
    assert verdict(row(4, 353, **changes), table).entry is None, why


def test_unknown_conditions_are_judged_and_said(table: ReferenceTable) -> None:
    j = verdict(row(4, 353, env={}, nccl=None), table)
    assert j.status == "normal"
    assert "do not name their NCCL version" in j.text()
    assert "do not say whether NVLS was on" in j.text()


def test_threshold_meets_and_short(table: ReferenceTable) -> None:
    on = {"NCCL_NVLS_ENABLE": "1"}
    big = 16 * GIB
    meets = verdict(row(8, 470, gpu="NVIDIA H100 80GB HBM3", size=big, env=on), table)
    assert meets.status == "meets" and "≥ 460" in meets.text()
    short = verdict(row(8, 430, gpu="NVIDIA H100 80GB HBM3", size=big, env=on), table)
    assert short.status == "short" and "is BELOW the a health check threshold" in short.text()
    # the same figure on 8 H200s is not held to the H100 threshold
    assert verdict(row(8, 430, size=big, env=on), table).entry is None


def test_lines_for_mixed_machines(table: ReferenceTable) -> None:
    rows = [
        row(4, 353, run="a", build="h200x4"),
        row(4, 353, gpu="NVIDIA H100 80GB HBM3", run="b", build="h100x4"),
        row(2, 300, run="c", build="h200x2"),
        row(1, 10, gpu=None, run="d", build="cpu", path="-"),
        row(3, 200, run="e", build="h200x3"),
        row(
            8,
            470,
            gpu="NVIDIA H100 80GB HBM3",
            size=16 * GIB,
            run="f",
            build="h100x8",
            env={"NCCL_NVLS_ENABLE": "1"},
        ),
    ]
    lines = reference_lines(frame_from_rows(rows), table=table)
    judged = [ln for ln in lines if "no reference" not in ln]
    assert len(judged) == 2
    assert any(
        ln.startswith("# reference: h200x4 ") and "normal for 4× H200" in ln for ln in judged
    )
    assert any(ln.startswith("# reference: h100x8 ") and "meets" in ln for ln in judged)
    missing = {ln.split()[2] for ln in lines if "no reference" in ln}
    assert missing == {"h100x4", "h200x2", "cpu", "h200x3"}


def _in_repo(cited: str) -> bool:
    """On disk, or under a run folder kept packed as <folder>.zip (benchmarks/archive.py)."""
    path = ROOT / cited
    if path.exists():
        return True
    for folder in (path, *path.parents):
        if folder == ROOT:
            break
        packed = folder.with_name(folder.name + ".zip")
        if packed.is_file():
            inner = path.relative_to(folder).as_posix()
            names = zipfile.ZipFile(packed).namelist()
            return any(inner in (".", n) or n.startswith(inner.strip(".") + "/") for n in names)
    return False


def test_shipped_tables_read_and_cite() -> None:
    paths = shipped_tables()
    assert {p.name for p in paths} >= {"published.yaml", "gpulane-h200x2.yaml"}
    for p in paths:
        for e in read_table(p):
            assert e.source and e.cite
            if not e.cite.startswith(("http", "DESIGN.md")):
                # several folders pooled into one range: ", "-joined, as `reference add` writes
                for cited in e.cite.split(", "):
                    assert _in_repo(cited), f"{p.name}: cites {cited}, not in the repo"


def test_committed_h200_run_is_its_own_reference_never_normal() -> None:
    # issue 44 item 10: the shipped 2x H200 range was made from this very run, so judging
    # the run against it says so; the same figure from another run is judged normally
    from gpulane.analysis.store import load_frame

    frame = load_frame(
        [ROOT / "benchmarks/collectives/h200x2-issue20/runs/20261123-053007-plain-big-9a69"]
    )
    frame = frame[(frame["op"] == "all_reduce") & (frame["size_bytes"] == 8 * GIB)]
    table = ReferenceTable.load()
    (line,) = reference_lines(frame, table=table)
    assert "reference is this run itself" in line and "normal" not in line, line
    other = frame.assign(run_id="another-run", build="another")
    (line,) = reference_lines(other, table=table)
    assert "normal for 2× H200 NV18 without NVLS" in line and "itself" not in line, line


def _site_entry(
    run_ids: tuple[str, ...],
    origin: str = "site",
    low: float = 330.0,
    high: float = 350.0,
    source: str = "site runs",
) -> Entry:
    return Entry(
        gpu=("NVIDIA H200",), path="NV18", world_size=4, op="all_reduce", low=low, high=high,
        source=source, cite="runs/r1", origin=origin, size_min=8 * GIB, size_max=8 * GIB,
        run_ids=run_ids,
    )  # fmt: skip


def test_self_made_entry_is_left_out_for_an_independent_one() -> None:
    # a site range made from run r1 and a published one both hold: r1 is judged against
    # the published one only, and the line names the range it left out
    facts = facts_of(row(4, 340.0, size=8 * GIB, run="r1"))
    own = _site_entry(("r1", "r2"))
    published = _site_entry((), origin="published", low=300.0, high=360.0, source="nccl#1")
    table = ReferenceTable([own, published])
    j = judge(340.0, facts, table, "busbw_gbps", run_id="r1")
    assert j.status == "normal" and j.entry is published
    assert "site runs's range is this run itself, left out" in j.text()
    assert judge(340.0, facts, table, "busbw_gbps", run_id="r3").entry is own
    alone = judge(340.0, facts, ReferenceTable([own]), "busbw_gbps", run_id="r2")
    assert alone.status == "self" and "reference is this run itself" in alone.text()
