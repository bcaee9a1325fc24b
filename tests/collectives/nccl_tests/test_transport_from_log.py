"""NCCL's own INFO lines printed into an nccl-tests log (NCCL_DEBUG=INFO) fill the rows'
``transport`` and ``extra.nccl`` (channels, version, pairs), as gpulane's own runs do, so
that ``nccl_transport_matches_path`` judges a user's own logs.

Real text only: public excerpts (tests/fixtures/public/SOURCES.md) and the 2xH200 machine's
captures. The H200 cases put the NCCL INFO lines of gpulane's runs on that machine (NCCL
2.28.9, files NCCL wrote with NCCL_DEBUG_FILE) where nccl-tests prints them (after its
device list) in that machine's own nccl-tests log: both are real captures of one machine,
assembled here, not a log NCCL and nccl-tests printed together."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.analysis.rules.model import FAIL, PASS, Context
from gpulane.analysis.rules.transport_checks import check_nccl_transport
from gpulane.analysis.store import frame_from_rows
from gpulane.collectives.nccl_tests.logs import rows_from_file, rows_from_log
from gpulane.errors import ParseError
from gpulane.record import Row
from gpulane.topology.model import Topology
from gpulane.topology.nccl_info import ORDER, parse_nccl_info
from gpulane.topology.nccl_logs import summary
from tests.analysis.fixture_rows import h200_topology
from tests.conftest import fixture_path

H200_LOG = fixture_path("h200x2/nccl-tests-all_reduce.txt")
RUNS = fixture_path("h200x2/doctor/runs")
PUBLIC = fixture_path("public/nccl-tests-info")
INFO = fixture_path("public/nccl-info")


def _run_info(preset: str) -> str:
    (run,) = RUNS.glob(f"*-{preset}-*")
    return "".join(p.read_text() for p in sorted((run / "nccl").glob("*.log")))


def assembled(info: str, log: Path = H200_LOG) -> str:
    """The nccl-tests log with ``info`` where NCCL prints its init: after the devices."""
    lines = log.read_text().splitlines(keepends=True)
    at = max(i for i, ln in enumerate(lines) if ln.startswith("#  Rank")) + 1
    return "".join(lines[:at]) + info + "".join(lines[at:])


def _measured(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.status == "ok"]


@pytest.mark.parametrize(
    ("preset", "transport"),
    [("nvlink", "P2P/CUMEM"), ("pcie-host", "SHM"), ("socket", "NET/Socket")],
)
def test_every_row_of_the_h200_log_carries_ncclS_transport(preset: str, transport: str) -> None:
    rows = rows_from_log(assembled(_run_info(preset)), "h200.log", build=preset)
    measured = _measured(rows)
    assert len(measured) == 2 * 31  # 8 B .. 8 GiB, out-of-place and in-place
    assert {r.transport for r in measured} == {transport}
    nccl = measured[0].extra["nccl"]
    assert nccl["version"] == "2.28.9"
    assert nccl["channels"] >= 1
    assert nccl["transport"] == transport
    assert [(p["a"], p["b"]) for p in nccl["pairs"] or []] in ([("GPU0", "GPU1")], [])
    # the same account gpulane's own run of that preset recorded
    assert summary(parse_nccl_info(_run_info(preset)))["transport"] == transport


def test_the_log_without_info_lines_has_no_transport() -> None:
    rows = rows_from_file(H200_LOG)
    assert _measured(rows) and all(r.transport is None for r in rows)
    assert all("nccl" not in r.extra for r in rows)


def _judge(rows: list[Row]) -> list[tuple[str, str]]:
    frame = frame_from_rows(rows)
    ctx = Context(frame=frame, topology=Topology.from_json(h200_topology()))
    return [(c.status, c.message) for c in check_nccl_transport("nccl_transport", {}, ctx)]


def test_nccl_transport_matches_path_judges_a_users_log() -> None:
    nvlink = _judge(rows_from_log(assembled(_run_info("nvlink")), "h200.log", build="nvlink"))
    assert [s for s, _ in nvlink] == [PASS]
    (socket,) = _judge(rows_from_log(assembled(_run_info("socket")), "h200.log", build="socket"))
    assert socket[0] == FAIL and "NET/Socket" in socket[1] and "NV18" in socket[1]
    (shm,) = _judge(rows_from_log(assembled(_run_info("pcie-host")), "h200.log", build="p"))
    assert shm[0] == FAIL and "SHM" in shm[1]


def test_h20_two_nodes_alltoall_excerpt() -> None:
    """NVIDIA/nccl#1189: alltoall_perf on 2 nodes x 2 H20, connections after the table
    header (P2P connects on first use): P2P/CUMEM inside a node, NET/IB/GDRDMA between."""
    path = INFO / "nccl1189_2node_2xH20_alltoall_cumem_ib_gdrdma_EXCERPTS.txt"
    rows = rows_from_file(path)
    assert rows and {r.transport for r in rows} == {"P2P/CUMEM+NET/IB/GDRDMA"}
    nccl = rows[0].extra["nccl"]
    assert nccl["channel_counts"] == {
        "coll": 8,
        "collnet": 0,
        "nvls": 0,
        "p2p": 8,
        "p2p_per_peer": 2,
    }
    assert {p["host"] for p in nccl["pairs"]} == {"H20-GPU-05", "H20-GPU-06"}


@pytest.mark.parametrize(
    ("name", "version", "network"),
    [
        ("nccl1320_2xA100_2.21.5_all_reduce_header_info_EXCERPT.txt", "2.21.5", None),
        ("nccltests131_2gpu_2.16.5_p2p_level_loc_socket_EXCERPT.txt", "2.16.5", "Socket"),
    ],
)
def test_a_log_cut_before_the_connections_keeps_what_nccl_said(
    name: str, version: str, network: str | None
) -> None:
    (row,) = rows_from_file(PUBLIC / name)
    assert row.status == "error" and "cut off" in (row.error or "")
    assert row.transport is None  # no connection was logged: unknown, not guessed
    assert row.extra["nccl"]["version"] == version
    assert row.extra["nccl"]["network"] == network


INFO_FILES = sorted(p.name for p in INFO.glob("*.txt") if "1189" not in p.name)


@pytest.mark.parametrize("name", INFO_FILES)
def test_every_versions_wording_in_an_nccl_tests_log(name: str) -> None:
    """The public NCCL INFO excerpts (NCCL 2.4 to 2.28 wordings: Ring/Channel, with and
    without connection index, bus ids, [send]/[receive], P2P/IPC, P2P/direct pointer,
    P2P/CUMEM, SHM, NET/Socket, NET/IB/GDRDMA, NVLS, launcher prefixes, timestamps) in an
    nccl-tests log give the rows the transport the NCCL parser reads from them alone."""
    info = (INFO / name).read_text(encoding="utf-8", errors="replace")
    expected = summary(parse_nccl_info(info))["transport"]
    rows = rows_from_log(assembled(info if info.endswith("\n") else info + "\n"), "x.log")
    measured = _measured(rows)
    assert len(measured) == 62
    assert {r.transport for r in measured} == {expected or None}


def _labels(transport: str | None) -> set[str]:
    return set(transport.split("+")) if transport else set()


FULL = assembled(_run_info("socket") + _run_info("nvlink"))
FULL_LABELS = _labels(summary(parse_nccl_info(FULL))["transport"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=len(FULL)))
def test_cut_anywhere_gives_rows_or_one_error_and_only_transports_it_holds(cut: int) -> None:
    text = FULL[:cut]
    try:
        rows = rows_from_log(text, "cut.log")
    except ParseError:
        assert "Using devices" not in text  # only a cut before the header is not nccl-tests
        return
    for r in rows:
        assert _labels(r.transport) <= FULL_LABELS
        assert _labels(r.transport) <= set(ORDER)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-8-sig", "latin-1"])
def test_the_log_in_another_encoding(tmp_path: Path, encoding: str) -> None:
    text = assembled(_run_info("nvlink"))
    path = tmp_path / "log.txt"
    data = text.encode(encoding)
    if encoding == "utf-16-le":
        data = b"\xff\xfe" + data  # as Windows tools write it: with its byte-order mark
    path.write_bytes(data)
    rows = rows_from_file(path)
    assert {r.transport for r in _measured(rows)} == {"P2P/CUMEM"}


def test_a_damaged_byte_in_an_info_line_names_its_line(tmp_path: Path) -> None:
    """Bytes that are not text in the log: one error naming the file and line (the CLI's
    one line, exit 2), never a transport read from garbage."""
    text = assembled(_run_info("nvlink"))
    at = text.index("via P2P/CUMEM")
    line = text[:at].count("\n") + 1
    path = tmp_path / "log.txt"
    path.write_bytes(text[:at].encode() + b"\xff\xfe\x00garbage " + text[at:].encode())
    with pytest.raises(ParseError) as err:
        rows_from_file(path)
    assert str(err.value).startswith(f"{path}:{line}: not UTF-8 text (byte 0xff)")
