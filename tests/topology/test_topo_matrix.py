"""Each fixture against the labels a person reading it would write down."""

from __future__ import annotations

import pytest

from gpulane.errors import ParseError
from gpulane.topology.topo_matrix import parse_topo_matrix
from tests.topology.helpers import H200, OLD_SOC, TOPO, tabs_to_spaces, text, to_crlf


def row(m, name: str) -> list[str]:
    return ["X" if name == other else m.labels[(name, other)] for other in m.names]


def test_h200x2() -> None:
    m = parse_topo_matrix(text(f"{H200}/topo-m.txt"), "topo-m.txt")
    assert m.gpus == ["GPU0", "GPU1"] and m.nics == []
    assert m.labels[("GPU0", "GPU1")] == "NV18"
    assert m.cpu_affinity == {"GPU0": "0-31", "GPU1": "0-31"}
    assert m.numa_affinity == {"GPU0": "0", "GPU1": "0"}
    assert m.gpu_numa_id == {"GPU0": None, "GPU1": None}
    assert m.columns == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]


def test_autodl_pix() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/autodl_2x2080ti_pix_gpunumaid.txt"))
    assert m.labels[("GPU0", "GPU1")] == "PIX"
    assert m.cpu_affinity["GPU1"] == "24-47,72-95"
    assert m.numa_affinity["GPU0"] == "1"


def test_della_sys_mlx5_columns() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/della_2xA100_sys_mlx5_tabs.txt"))
    assert m.names == ["GPU0", "GPU1", "NIC0", "NIC1"]
    assert m.nic_devices == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert row(m, "GPU0") == ["X", "SYS", "NODE", "SYS"]
    assert row(m, "GPU1") == ["SYS", "X", "SYS", "NODE"]
    assert m.cpu_affinity == {"GPU0": "0-63", "GPU1": "64-127"}
    assert m.numa_affinity == {"GPU0": "0", "GPU1": "1"}


def test_delos_mixed_nvlink() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/delos_4xV100_mixed_NV2_NV1_SYS_tabs.txt"))
    assert row(m, "GPU0") == ["X", "NV2", "NV2", "SYS"]
    assert row(m, "GPU1") == ["NV2", "X", "SYS", "NV1"]
    assert row(m, "GPU2") == ["NV2", "SYS", "X", "NV2"]
    assert row(m, "GPU3") == ["SYS", "NV1", "NV2", "X"]
    assert m.cpu_affinity["GPU2"] == "20-39,60-79"


def test_llmaction_crlf_nic_legend() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/llmaction_8xA800_NV8_4nics_nic_legend_CRLF.txt"))
    assert len(m.gpus) == 8 and m.nics == ["NIC0", "NIC1", "NIC2", "NIC3"]
    assert all(m.labels[(a, b)] == "NV8" for a in m.gpus for b in m.gpus if a != b)
    assert row(m, "GPU1")[8:] == ["PIX", "NODE", "SYS", "SYS"]
    assert row(m, "GPU7")[8:] == ["SYS", "SYS", "PIX", "PIX"]
    assert row(m, "NIC0") == [
        "NODE",
        "PIX",
        "NODE",
        "NODE",
        "SYS",
        "SYS",
        "SYS",
        "SYS",
        "X",
        "NODE",
        "SYS",
        "SYS",
    ]
    assert m.nic_devices["NIC3"] == "mlx5_3"
    assert m.numa_affinity["GPU4"] == "1"
    assert "GPU NUMA ID" not in m.columns


def test_stelline_node_sys() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/stelline_asus_4xRTX6000Ada_node_sys_4nics.txt"))
    assert row(m, "GPU0") == ["X", "NODE", "SYS", "SYS", "NODE", "NODE", "SYS", "SYS"]
    assert row(m, "GPU3") == ["SYS", "SYS", "NODE", "X", "SYS", "SYS", "NODE", "NODE"]
    assert m.labels[("NIC0", "NIC1")] == "PIX"
    assert m.nic_devices == {f"NIC{i}": f"mlx5_{i}" for i in range(4)}


def test_puget_phb() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/stelline_puget_wrx90_2xRTX6000Ada_phb_2nics.txt"))
    assert row(m, "GPU0") == ["X", "PHB", "NODE", "NODE"]
    assert m.labels[("NIC0", "NIC1")] == "PIX"
    assert m.cpu_affinity["GPU1"] == "0-23"


def test_traverse_nv3_numa8() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/traverse_ac922_4xV100_NV3_numa8_tabs.txt"))
    assert row(m, "GPU0")[:4] == ["X", "NV3", "SYS", "SYS"]
    assert row(m, "GPU2")[:4] == ["SYS", "SYS", "X", "NV3"]
    assert row(m, "GPU2")[4:] == ["SYS", "SYS", "NODE", "NODE"]
    assert m.numa_affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "8", "GPU3": "8"}
    assert m.nic_devices["NIC3"] == "mlx5_3"


def test_xst_phb_numa_na() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/xst_2x1080ti_phb_numa_na.txt"))
    assert m.labels[("GPU0", "GPU1")] == "PHB"
    assert m.numa_affinity == {"GPU0": None, "GPU1": None}
    assert m.cpu_affinity["GPU0"] == "0-11"


def test_xst_a10_all_sys() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/xst_4xA10_sys_nic_legend.txt"))
    assert all(m.labels[(a, b)] == "SYS" for a in m.gpus for b in m.names if a != b)
    assert m.labels[("NIC0", "NIC1")] == "PIX"


def test_xst_8xa100_17_nics() -> None:
    m = parse_topo_matrix(text(f"{TOPO}/xst_8xA100_NV12_17nics_bond_nic_legend.txt"))
    assert len(m.nics) == 17
    assert m.nic_devices["NIC16"] == "mlx5_bond_0"
    assert all(m.labels[(a, b)] == "NV12" for a in m.gpus for b in m.gpus if a != b)
    assert row(m, "GPU0")[8:13] == ["PXB", "PXB", "PXB", "PXB", "SYS"]
    assert row(m, "GPU7")[20:24] == ["PXB"] * 4
    assert m.labels[("NIC16", "GPU0")] == "SYS"


def test_old_soc_variant() -> None:
    m = parse_topo_matrix(OLD_SOC, "old")
    assert m.labels[("GPU0", "GPU2")] == "SYS"
    assert m.original[("GPU0", "GPU2")] == "SOC"
    assert m.labels[("GPU2", "GPU3")] == "PXB"
    assert m.labels[("GPU0", "NIC0")] == "PHB"
    assert m.nic_devices == {"NIC0": "mlx4_0"}
    assert m.columns == ["CPU Affinity"]
    assert m.cpu_affinity["GPU3"] == "8-15,24-31"


@pytest.mark.parametrize(
    "name",
    [
        f"{H200}/topo-m.txt",
        f"{TOPO}/della_2xA100_sys_mlx5_tabs.txt",
        f"{TOPO}/delos_4xV100_mixed_NV2_NV1_SYS_tabs.txt",
        f"{TOPO}/traverse_ac922_4xV100_NV3_numa8_tabs.txt",
        f"{TOPO}/llmaction_8xA800_NV8_4nics_nic_legend_CRLF.txt",
    ],
)
def test_tabs_spaces_crlf_read_the_same(name: str) -> None:
    original = parse_topo_matrix(text(name))
    for variant in (
        tabs_to_spaces(text(name)),
        to_crlf(text(name)),
        text(name).replace("\r\n", "\n"),
    ):
        m = parse_topo_matrix(variant)
        assert m.labels == original.labels
        assert m.cpu_affinity == original.cpu_affinity
        assert m.numa_affinity == original.numa_affinity
        assert m.nic_devices == original.nic_devices


def test_ansi_codes_with_lost_escape() -> None:
    pasted = text(f"{H200}/topo-m.txt").replace("\x1b", "")
    assert parse_topo_matrix(pasted).labels[("GPU1", "GPU0")] == "NV18"


# --- broken input ---------------------------------------------------------------------


def err(t: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_topo_matrix(t, "f.txt")
    return info.value


def test_empty() -> None:
    e = err("")
    assert e.source == "f.txt" and e.line == 1
    assert "empty" in str(e)
    assert "empty" in str(err("\n\n  \n"))


def test_truncated() -> None:
    lines = text(f"{TOPO}/delos_4xV100_mixed_NV2_NV1_SYS_tabs.txt").splitlines()
    e = err("\n".join(lines[:3]))
    assert e.line == 4 and "truncated" in str(e) and "GPU2" in str(e)
    cut = "\n".join([*lines[:2], lines[2][:12]])
    e = err(cut)
    assert e.line == 3 and "GPU1" in str(e)


def test_garbled_cell() -> None:
    t = text(f"{TOPO}/delos_4xV100_mixed_NV2_NV1_SYS_tabs.txt").replace("NV1", "NVX", 1)
    e = err(t)
    assert e.line == 3 and "NVX" in str(e)


def test_asymmetric() -> None:
    t = text(f"{TOPO}/delos_4xV100_mixed_NV2_NV1_SYS_tabs.txt").replace("\tNV1\t", "\tNV2\t", 1)
    assert "symmetric" in str(err(t))


def test_binary() -> None:
    e = err("\tGPU0\tGPU1\nGPU0\t X \x00\x01")
    assert e.line == 2 and "binary" in str(e)


def test_wrong_kind_lspci() -> None:
    e = err(text(f"{LSPCI}/stelline_asus_rtx6000ada_lspci_vvv_01_00.0.txt"))
    assert "lspci" in str(e) and e.line == 1


def test_wrong_kind_p2p() -> None:
    e = err(text(f"{H200}/topo-p2p-r.txt"))
    assert "topo -p2p" in str(e)


def test_wrong_kind_smi_q() -> None:
    assert "nvidia-smi -q" in str(err(text(f"{H200}/nvidia-smi-q.txt")))


def test_extra_row() -> None:
    t = text(f"{H200}/topo-m.txt").replace("\n\nLegend", "\nGPU2\tNV18\t X \n\nLegend")
    e = err(t)
    assert e.line == 4 and "unexpected line" in str(e)


LSPCI = "public/lspci"


# -- every refusal, its exact words, file and line (what the user reads) ------------------
GOOD = (
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tPIX\t0-31\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tSYS\t0-31\t0\t\tN/A\n"
    "NIC0\tPIX\tSYS\t X \n"
    "\n"
    "Legend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe\n\n"
    "NIC Legend:\n\n  NIC0: mlx5_0\n"
)


def test_the_good_matrix_reads_every_field() -> None:
    m = parse_topo_matrix(GOOD, "f.txt")
    assert m.devices == ["GPU0", "GPU1", "NIC0"] and m.gpus == ["GPU0", "GPU1"]
    assert m.nics == ["NIC0"] and m.nic_devices == {"NIC0": "mlx5_0"}
    assert m.label("GPU0", "GPU1") == "NV18" and m.label("NIC0", "GPU1") == "SYS"
    assert m.columns == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert m.cpu_affinity == {"GPU0": "0-31", "GPU1": "0-31"}
    assert m.numa_affinity == {"GPU0": "0", "GPU1": "0"}
    assert m.gpu_numa_id == {"GPU0": None, "GPU1": None}
    assert m.legend == {"X": "Self", "SYS": "Connection traversing PCIe"}
    assert m.source == "f.txt"


def _damage(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("\n\n", 1, "empty: no nvidia-smi topo -m matrix"),
        (_damage("\tCPU Affinity", "\tCPU Bogus"), 1,
         "unexpected column header 'CPU' (known: CPU Affinity, NUMA Affinity, GPU NUMA ID)"),
        (_damage("\tNUMA Affinity", "\tCPU Affinity"), 1, "a column header appears twice"),
        ("\tCPU Affinity\nGPU0\t0-31\n", 1,
         "no device columns in the header (expected GPU0 GPU1 ...)"),
        (_damage("\tGPU1\tNIC0", "\tGPU!\tNIC0"), 1, "'GPU!' is not a device column name"),
        ("\tNIC0\tNIC1\nNIC0\t X \tPIX\nNIC1\tPIX\t X \n", 1,
         "the header names no GPU (expected GPU0 GPU1 ...)"),
        (_damage("\tGPU1\tNIC0", "\tGPU0\tNIC0"), 1,
         "a device column appears twice in the header"),
        (_damage("NIC0\tPIX\tSYS\t X \n", ""), 4,
         "truncated matrix: no row for NIC0 (the header has 3 devices)"),
        (_damage("GPU1\tNV18\t X ", "GPU7\tNV18\t X "), 3, "expected the row of GPU1, found 'GPU7'"),
        (_damage("GPU1\tNV18\t X \tSYS\t0-31\t0\t\tN/A", "GPU1\tNV18\t X"), 3,
         "row GPU1 has 2 cells, the header has 3 devices (truncated or damaged line)"),
        (_damage("GPU0\t X \tNV18", "GPU0\t Y \tNV18"), 2, "GPU0 against itself should be X, found 'Y'"),
        (_damage("GPU0\t X \tNV18", "GPU0\t X \tOK"), 1,
         "this looks like nvidia-smi topo -p2p output, not nvidia-smi topo -m"),
        (_damage("GPU0\t X \tNV18", "GPU0\t X \tNV0"), 2,
         "'NV0' between GPU0 and GPU1 is not a path label "
         "(expected X, NV#, PIX, PXB, PHB, NODE, SYS or SOC)"),
        (_damage("\tN/A\n", "\tN/A\textra\n"), 2,
         "row GPU0 has 4 cells after the matrix, the header names 3 "
         "(CPU Affinity, NUMA Affinity, GPU NUMA ID)"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV1\tjunk\nGPU1\tNV1\t X \n", 2,
         "row GPU0 has 1 cells after the matrix, the header names 0 (none)"),
        (_damage("PIX\t0-31", "PIX\tall"), 2, "CPU Affinity 'all' is not a CPU list"),
        (_damage("PIX\t0-31\t0", "PIX\t0-31\tnode0"), 2, "NUMA Affinity 'node0' is not a node list"),
        (_damage("PIX\t0-31\t0\t\tN/A", "PIX\t0-31\t0\tx1"), 2, "GPU NUMA ID 'x1' is not a number"),
        (_damage("NIC0\tPIX\tSYS\t X ", "NIC0\tPIX\tSYS\t X \t0-31"), 4,
         "NIC row NIC0 has cells after the matrix"),
        (_damage("GPU1\tNV18\t X \tSYS", "GPU1\tNV18\t X \tPXB"), 1,
         "matrix is not symmetric: GPU1->NIC0 is PXB but NIC0->GPU1 is SYS"),
        (_damage("\nLegend:", "\nstray words\nLegend:"), 6,
         "unexpected line after the matrix (the header has 3 devices): 'stray words'"),
        (_damage("NIC0: mlx5_0", "NIC3: mlx5_0"), 13, "the NIC legend names NIC3, which is not in the matrix"),
    ],
)  # fmt: skip
def test_every_refusal_says_what_where(text: str, line: int, message: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "f.txt")
    assert (err.value.source, err.value.line, err.value.reason) == ("f.txt", line, message)


def test_tabs_blank_cells_and_na_are_none() -> None:
    m = parse_topo_matrix(
        _damage("GPU1\tNV18\t X \tSYS\t0-31\t0\t\tN/A", "GPU1\tNV18\t X \tSYS\t0-31\tN/A"), "f"
    )
    assert m.numa_affinity["GPU1"] is None and m.cpu_affinity["GPU1"] == "0-31"
    assert m.gpu_numa_id["GPU1"] is None
    m = parse_topo_matrix(_damage("PIX\t0-31\t0\t\tN/A", "PIX\t0-31\t0\t3"), "f")
    assert m.gpu_numa_id["GPU0"] == 3


def test_legends_without_colons_and_meanings_holding_equals() -> None:
    text = GOOD.replace("Legend:", "Legend", 1).replace("NIC Legend:", "NIC Legend")
    text = text.replace("  X    = Self", "  X    = Self = the GPU itself")
    m = parse_topo_matrix(text, "f.txt")
    assert m.legend["X"] == "Self = the GPU itself"
    assert m.nic_devices == {"NIC0": "mlx5_0"}
    # a NIC line in the plain legend is not a NIC legend entry
    m = parse_topo_matrix(GOOD.replace("NIC Legend:\n\n  NIC0: mlx5_0\n", "  NIC0: mlx5_0\n"), "f")
    assert m.nic_devices == {"NIC0": None}
    # the plain legend after the NIC legend ends it
    text = GOOD + "\nLegend:\n  NIC9: mlx5_9\n"
    assert parse_topo_matrix(text, "f").nic_devices == {"NIC0": "mlx5_0"}


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (_damage("NIC0\tPIX\tSYS\t X \n\n", ""), 4,
         "truncated matrix: no row for NIC0 (the header has 3 devices)"),  # "Legend:" follows
        (_damage("GPU1\tNV18\t X \tSYS\t0-31\t0\t\tN/A\nNIC0\tPIX\tSYS\t X \n", ""), 3,
         "truncated matrix: no row for GPU1, NIC0 (the header has 3 devices)"),
        (_damage("\nLegend:", "\n" + "x" * 50 + "\nLegend:"), 6,
         f"unexpected line after the matrix (the header has 3 devices): {'x' * 40!r}"),
        ("\x00\x01", 1, "binary data (NUL bytes), not captured text output"),
    ],
)  # fmt: skip
def test_more_refusals(text: str, line: int, message: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text, "f.txt")
    assert (err.value.source, err.value.line, err.value.reason) == ("f.txt", line, message)
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(text)  # no file name given: the error says <text>
    assert err.value.source == "<text>"


def test_gpu_numa_id_as_the_only_extra_column() -> None:
    text = "\tGPU0\tGPU1\tGPU NUMA ID\nGPU0\t X \tNV4\t1\nGPU1\tNV4\t X \t3\n"
    m = parse_topo_matrix(text, "f")
    assert m.devices == ["GPU0", "GPU1"] and m.columns == ["GPU NUMA ID"]
    assert m.gpu_numa_id == {"GPU0": 1, "GPU1": 3}
    # "GPU NUMA" without "ID" does not start that header: "NUMA" alone is refused
    with pytest.raises(ParseError) as err:
        parse_topo_matrix("\tGPU0\tGPU\tNUMA\nGPU0\t X \tNV4\n", "f")
    assert err.value.reason == (
        "unexpected column header 'NUMA' (known: CPU Affinity, NUMA Affinity, GPU NUMA ID)"
    )


def test_gpu_numa_id_before_other_columns() -> None:
    text = (
        "\tGPU0\tGPU1\tGPU NUMA ID\tCPU Affinity\nGPU0\t X \tNV4\t1\t0-7\nGPU1\tNV4\t X \t3\t8-15\n"
    )
    m = parse_topo_matrix(text, "f")
    assert m.devices == ["GPU0", "GPU1"] and m.columns == ["GPU NUMA ID", "CPU Affinity"]
    assert m.gpu_numa_id == {"GPU0": 1, "GPU1": 3}
    assert m.cpu_affinity == {"GPU0": "0-7", "GPU1": "8-15"}
