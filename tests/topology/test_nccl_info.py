"""NCCL's INFO lines, as users pasted them in public issue threads
(tests/fixtures/public/nccl-info, sources in SOURCES.md): the transport per GPU pair, the
channel counts, rings and version, and no traceback whatever the lines hold."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.topology.nccl_info import dev_name, parse_nccl_info, parse_nccl_texts, via_label
from gpulane.topology.nccl_logs import describe, summary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "public" / "nccl-info"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_two_nodes_h20_cumem_inside_ib_gdrdma_between():
    info = parse_nccl_info(fixture("nccl1189_2node_2xH20_alltoall_cumem_ib_gdrdma_EXCERPTS.txt"))
    assert info.label() == "P2P/CUMEM+NET/IB/GDRDMA"
    # Four processes, one communicator (one commId), 8 coll channels as every rank said.
    assert len(info.communicators) == 1
    comm = info.communicators[0]
    assert comm.comm_id == "0xf021d9037f9243d8" and comm.nranks == 4 and comm.complete
    assert comm.channels == {"coll": 8, "collnet": 0, "nvls": 0, "p2p": 8, "p2p_per_peer": 2}
    assert comm.ranks[2]["host"] == "H20-GPU-06" and comm.ranks[2]["bus_id"] == "0000:18:00.0"
    s = summary(info)
    pairs = {(p["host"], p["a"], p["b"]): p["transport"] for p in s["pairs"]}
    assert pairs == {
        ("H20-GPU-06", "GPU0", "GPU1"): "P2P/CUMEM",
        ("H20-GPU-05", "GPU0", "GPU1"): "P2P/CUMEM",
    }
    # [receive] lines name the receiver's GPU, [send] lines the sender's: both are GPU1 here.
    net = {(n["host"], n["gpu"]): n for n in s["net"]}
    assert net[("H20-GPU-06", "GPU1")]["transport"] == "NET/IB/GDRDMA"
    assert net[("H20-GPU-06", "GPU1")]["channels"] == 8
    assert describe(s, "NET") == "P2P/CUMEM+NET/IB/GDRDMA, 8 channels (NET)"


def test_shm_in_the_format_without_connection_index():
    info = parse_nccl_info(fixture("nccl1609_h800_shm_direct_oldfmt_EXCERPT.txt"))
    assert info.label() == "SHM"
    s = summary(info)
    assert [(p["a"], p["b"], p["transport"], p["via"]) for p in s["pairs"]] == [
        ("GPU6", "GPU7", "SHM", ["SHM/direct/direct"])
    ]
    assert s["pairs"][0]["channels"] == 12  # channels 7-15 one way, 0-2 the other


def test_ipc_read_and_socket_on_one_node_of_two():
    info = parse_nccl_info(fixture("nccl952_8xgpu_p2p_ipc_read_net_socket_EXCERPT.txt"))
    assert info.label() == "P2P/IPC+NET/Socket"
    s = summary(info)
    assert {"host": "<cluster_name>", "gpu": "GPU7", "transport": "NET/Socket", "channels": 2} in s[
        "net"
    ]


def test_direct_pointer_of_one_process_driving_eight_gpus():
    info = parse_nccl_info(
        fixture("nccltests213_8xgpu_p2p_direct_pointer_single_process_EXCERPT.txt")
    )
    assert info.label() == "P2P/direct pointer"
    pairs = {(p["a"], p["b"]) for p in summary(info)["pairs"]}
    assert ("GPU0", "GPU7") in pairs and ("GPU3", "GPU4") in pairs


def test_older_versions_name_gpus_by_bus_id():
    info = parse_nccl_info(fixture("nccl429_2node_v2.7_busid_p2p_direct_ib_gdrdma_EXCERPT.txt"))
    assert info.label() == "P2P/direct pointer+NET/IB/GDRDMA"
    pairs = {(p["host"], p["a"], p["b"]) for p in summary(info)["pairs"]}
    assert ("machine-2", "0000:1a:00.0", "0000:1b:00.0") in pairs


def test_version_without_prefix_and_no_ib_device():
    info = parse_nccl_info(fixture("nccl1121_8xA6000_2.18.5_socket_version_EXCERPT.txt"))
    assert info.version == "2.18.5" and info.cuda == "11.8"
    assert info.no_device == ["NET/IB: no device found"]
    assert info.label() is None  # no connection in the excerpt: the transport stays unknown


def test_mpirun_tags_in_front_of_every_line():
    info = parse_nccl_info(fixture("nccl300_4gpu_2.5.6_mpirun_tagged_socket_lo_EXCERPT.txt"))
    assert info.version == "2.5.6"
    assert info.net_devices["Socket"] == "[0]lo:127.0.0.1<0>"


def test_rings_trees_and_warnings():
    info = parse_nccl_info(fixture("nccl1066_2rank_2.12_ib_rings_trees_EXCERPT.txt"))
    assert info.version == "2.12.12" and info.networks == ["IB"]
    comm = info.communicators[0]
    assert comm.rings == {0: [0, 1], 1: [0, 1]}
    assert list(comm.trees.values()) == ["[0] -1/-1/-1->1->0 [1] 0/-1/-1->1->-1"]
    assert info.affinity == {"gcn6/GPU0": "03ffff"}
    assert info.warnings[0].startswith("nvmlDeviceGetHandleByPciBusId() failed")


def test_nvls_heads_mean_nvls_in_use_and_graph_search_results():
    info = parse_nccl_info(fixture("nccl1519_2node_16xH100_nvls_heads_pattern_EXCERPT.txt"))
    assert "NVLS" in info.labels()
    comm = info.communicators[0]
    assert comm.nranks == 16 and comm.nnodes == 2
    assert comm.patterns[0]["type"] == "NVL/PHB" and comm.patterns[0]["channels"] == 7


def test_lines_cut_by_a_logger_are_counted_not_fatal():
    info = parse_nccl_info(fixture("easydistill4_8xgpu_p2p_ipc_python_logging_MANGLED.txt"))
    assert info.label() == "P2P/IPC"
    assert len(info.links) == 9  # the two "P2P/IPC" fragments are no connections


def test_timestamps_on_lines_of_their_own():
    info = parse_nccl_info(fixture("awsofi715_8xgpu_p2p_cumem_read_timestamp_lines_EXCERPT.txt"))
    assert info.label() == "P2P/CUMEM"
    assert info.nvls_support == {"algo-1/GPU5": False, "algo-1/GPU6": False}
    assert {v for p in summary(info)["pairs"] for v in p["via"]} == {"P2P/CUMEM/read"}


def test_one_communicator_across_files_of_its_ranks():
    text = fixture("nccl1189_2node_2xH20_alltoall_cumem_ib_gdrdma_EXCERPTS.txt").splitlines()
    by_host = ["\n".join(x for x in text if x.startswith(h)) for h in ("H20-GPU-05", "H20-GPU-06")]
    info = parse_nccl_texts(by_host)
    assert len(info.communicators) == 1
    assert sorted(info.communicators[0].ranks) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("via", "label"),
    [
        ("P2P/CUMEM/read", "P2P/CUMEM"),
        ("P2P/IPC/read", "P2P/IPC"),
        ("P2P/direct pointer/read", "P2P/direct pointer"),
        ("SHM/CE/direct", "SHM"),
        ("NET/IB/0/GDRDMA", "NET/IB/GDRDMA"),
        ("NET/IBext_v8/3", "NET/IB"),
        ("NET/Socket/0", "NET/Socket"),
        ("COLLNET/IB/1/GDRDMA", "CollNet"),
    ],
)
def test_via_labels(via: str, label: str):
    assert via_label(via)[0] == label


def test_device_names():
    assert dev_name("3") == "GPU3"
    assert dev_name("1b000") == "0000:1b:00.0"
    assert dev_name("c7000") == "0000:c7:00.0"
    assert dev_name("zz") is None


LINE_PIECES = [
    "host:1:2 [0] NCCL INFO ",
    "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
    "Channel 01 : 1[1] -> 0[0] [send] via NET/IB/0/GDRDMA",
    "comm 0x5 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
    "ncclCommInitRank comm 0x5 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 6000 commId 0x1 - Init COMPLETE",
    "2 coll channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer",
    "Channel 00/02 :    0   1",
    "Ring 00 : 1 -> 0 -> 1",
    "Trees [0] 1/-1/-1->0->-1",
    "Pattern 4, crossNic 0, nChannels 2, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1",
    "NCCL version 2.28.9+cuda13.0",
    "GPU Direct RDMA Enabled for GPU 0 / HCA 1 (distance 3 <= 4), read 1 mode Default",
    "NCCL WARN ",
    "via ",
    "[",
    "]",
    "->",
    "99999999999999999999999999999",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.sampled_from(LINE_PIECES),
            st.text(max_size=40),
            st.sampled_from(LINE_PIECES).flatmap(
                lambda piece: st.integers(0, len(piece)).map(lambda cut: piece[:cut])
            ),
        ),
        max_size=12,
    ).map("".join),
    st.integers(0, 3),
)
def test_damaged_lines_never_raise(line: str, copies: int):
    """Any text, any cut: a result (perhaps empty), never a traceback."""
    info = parse_nccl_info("\n".join([line] * (copies + 1)))
    s = summary(info)
    assert isinstance(s["pairs"], list)
    describe(s, "NV18")


def test_lines_fed_one_at_a_time_as_an_importer_streams_them():
    from gpulane.topology.nccl_info import NcclLineReader

    reader = NcclLineReader()
    lines = fixture("nccl1189_2node_2xH20_alltoall_cumem_ib_gdrdma_EXCERPTS.txt").splitlines()
    for line in lines[:30]:
        reader.feed(line)
    assert reader.info().label() == "NET/IB/GDRDMA"
    for line in lines[30:]:
        reader.feed(line)
    # Asking twice merges nothing twice.
    assert reader.info().label() == reader.info().label() == "P2P/CUMEM+NET/IB/GDRDMA"
    assert len(reader.info().links) == len(parse_nccl_info("\n".join(lines)).links)
