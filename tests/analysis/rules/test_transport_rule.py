"""nccl_transport_matches_path over rows that carry NCCL's account (extra.nccl, built from
public INFO logs by topology/nccl_logs.summary) and the H200 machine's topology."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpulane.analysis.rules import FAIL, PASS, SKIP, evaluate
from gpulane.analysis.store import frame_from_rows
from gpulane.record import Row
from gpulane.topology.nccl_info import parse_nccl_info
from gpulane.topology.nccl_logs import summary
from tests.analysis.fixture_rows import h200_topology
from tests.analysis.rules.rule_sets import rule_set

INFO = Path(__file__).resolve().parents[2] / "fixtures" / "public" / "nccl-info"
RULE = "nccl_transport_matches_path"


def nccl(name: str) -> dict[str, Any]:
    return summary(parse_nccl_info((INFO / name).read_text()), str(INFO / name))


def row(extra_nccl: dict[str, Any] | None, **kw: Any) -> Row:
    extra = {"nccl": extra_nccl} if extra_nccl else {}
    base: dict[str, Any] = {"world_size": 2, "path": None, "build": "b", "host": "vm"}
    return Row(
        run_id=kw.pop("run_id", "r"), kind="collective", backend="torch-nccl", op="all_reduce",
        size_bytes=1 << 20, transport=(extra_nccl or {}).get("transport"), extra=extra,
        **{**base, **kw},
    )  # fmt: skip


def lines(rows: list[Row], topology: Any = None, evidence: Any = None) -> list[Any]:
    v = evaluate(frame_from_rows(rows), rule_set(), topology, evidence=evidence)
    return [c for c in v.checks if c.rule == RULE]


def test_cumem_on_an_nvlink_pair_passes_and_ib_with_gdr_between_nodes():
    # The H20 run's pairs are GPU0-GPU1 on each host; held against the H200's NV18 pair.
    checks = lines([row(nccl("nccl1189_2node_2xH20_alltoall_cumem_ib_gdrdma_EXCERPTS.txt"))],
                   h200_topology())  # fmt: skip
    assert {c.status for c in checks} == {PASS}
    pairs = [c for c in checks if c.subject.endswith("GPU0-GPU1")]
    assert {c.subject for c in pairs} == {"H20-GPU-05:GPU0-GPU1", "H20-GPU-06:GPU0-GPU1"}
    assert pairs[0].message == "NV18: NCCL used P2P/CUMEM"
    net = [c for c in checks if c.subject == "H20-GPU-06:GPU1"]
    assert net[0].message == "NET: NCCL used NET/IB/GDRDMA"


def test_shm_on_nvlink_fails_naming_the_pair_the_transport_and_the_cause():
    shm = nccl("nccl1609_h800_shm_direct_oldfmt_EXCERPT.txt")
    # GPU6-GPU7 of an 8x H800 (NVLink to every peer); no topology: the run's own label.
    (c,) = lines([row(shm, path="NV8")])
    assert (c.status, c.subject) == (FAIL, "GPU6-GPU7")
    assert c.message.startswith("NV8: NCCL used SHM, not P2P over NVLink; likely cause: ")
    assert "run gpulane doctor" in c.message
    (c,) = lines([row(shm, path="NV8", env={"NCCL_P2P_DISABLE": "1"})])
    assert c.message.endswith("likely cause: NCCL_P2P_DISABLE=1 in the run's environment")
    doctor = [
        {"check": "acs", "severity": "error", "title": "ACS redirects peer traffic at 0000:02:08.0"}
    ]
    (c,) = lines([row(shm, path="NV8")], evidence={"doctor": doctor})
    assert c.message.endswith("likely cause: ACS redirects peer traffic at 0000:02:08.0")


def test_shm_across_sockets_is_what_the_path_allows():
    shm = nccl("nccl1609_h800_shm_direct_oldfmt_EXCERPT.txt")
    (c,) = lines([row(shm, path="SYS")])
    assert c.status == PASS and "no P2P expected across SYS" in c.message


def test_sockets_between_nodes_fail():
    socket = nccl("nccl226_64rank_socket_ring_trees_v2.4_EXCERPT.txt")
    checks = lines([row(socket, path="NET", world_size=64)])
    assert checks and {c.status for c in checks} == {FAIL}
    assert checks[0].message.startswith("NET: NCCL used NET/Socket between nodes")
    (c, *_) = lines([row(socket, path="NET", world_size=64, env={"NCCL_IB_DISABLE": "1"})])
    assert c.message.endswith("likely cause: NCCL_IB_DISABLE=1 in the run's environment")


def test_rows_without_nccls_account_are_skipped():
    (c,) = lines([row(None, path="NV18")], h200_topology())
    assert c.status == SKIP and "extra.nccl" in c.message


def test_builds_are_named_apart():
    shm = nccl("nccl1609_h800_shm_direct_oldfmt_EXCERPT.txt")
    cumem = nccl("awsofi715_8xgpu_p2p_cumem_read_timestamp_lines_EXCERPT.txt")
    rows = [row(shm, path="NV8", build="pcie-host", run_id="a"),
            row(cumem, path="NV8", build="nvlink", run_id="b")]  # fmt: skip
    checks = lines(rows)
    assert {(c.subject.split("/")[0], c.status) for c in checks} == {
        ("pcie-host", FAIL), ("nvlink", PASS)
    }  # fmt: skip
