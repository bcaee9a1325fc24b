"""nccl-tests logs (text and -J JSON) as rows: every captured log, every number."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.collectives.nccl_tests.logs import iter_runs, parse_log, rows_from_file, rows_from_log
from gpulane.collectives.nccl_tests.rows import iter_rows
from gpulane.collectives.nccl_tests.text import parse_text
from gpulane.errors import ParseError
from gpulane.record import Row
from tests.collectives.nccl_tests.common import (
    ALL,
    H200_TEXT,
    data_lines,
    errors,
    half_tokens,
    measured,
    rows_of,
)
from tests.conftest import FIXTURES, fixture_path

# ----------------------------------------------------------------------- row counts


# file -> (tests, table lines, op, world size, error rows)
COUNTS = {
    "h200x2/nccl-tests-all_gather.json": (1, 31, "all_gather", 2, 0),
    "h200x2/nccl-tests-all_gather.txt": (1, 31, "all_gather", 2, 0),
    "h200x2/nccl-tests-all_reduce-bf16.txt": (1, 28, "all_reduce", 2, 0),
    "h200x2/nccl-tests-all_reduce-graph.txt": (1, 24, "all_reduce", 2, 0),
    "h200x2/nccl-tests-all_reduce-p2p-disabled.txt": (1, 30, "all_reduce", 2, 0),
    "h200x2/nccl-tests-all_reduce-per-iter.txt": (1, 24, "all_reduce", 2, 0),
    "h200x2/nccl-tests-all_reduce.json": (1, 31, "all_reduce", 2, 0),
    "h200x2/nccl-tests-all_reduce.txt": (1, 31, "all_reduce", 2, 0),
    "h200x2/nccl-tests-broadcast.txt": (1, 31, "broadcast", 2, 0),
    "h200x2/nccl-tests-mpi-all_reduce-graph.txt": (1, 24, "all_reduce", 2, 0),
    "h200x2/nccl-tests-mpi-all_reduce.txt": (1, 24, "all_reduce", 2, 0),
    "h200x2/nccl-tests-reduce_scatter.txt": (1, 31, "reduce_scatter", 2, 0),
    "public/nccl-tests/a3mega_2node_16xH100_mpirun_all_reduce_8G.txt": (1, 31, "all_reduce", 16, 0),
    "public/nccl-tests/autodl_2x2080ti_all_gather_pcie.txt": (1, 28, "all_gather", 2, 0),
    "public/nccl-tests/autodl_2x2080ti_all_reduce_pcie_noP2P.txt": (1, 28, "all_reduce", 2, 0),
    "public/nccl-tests/autodl_2x2080ti_alltoall_pcie.txt": (1, 28, "alltoall", 2, 0),
    "public/nccl-tests/autodl_2x2080ti_broadcast_root0.txt": (1, 28, "broadcast", 2, 0),
    "public/nccl-tests/azureml_4xK80_all_reduce_OLDFMT_nccl_info_interleaved.txt": (
        1,
        7,
        "all_reduce",
        4,
        0,
    ),
    "public/nccl-tests/coreweave_gb200_20racks_1440ranks_all_reduce_FRAGMENT.txt": (
        1,
        6,
        "all_reduce",
        None,
        0,
    ),
    "public/nccl-tests/coreweave_h100_64gpu_sharp_mpijob_ELIDED.txt": (1, 5, "all_reduce", None, 0),
    "public/nccl-tests/likejazz_3node_T4_all_reduce_validation0_NA.txt": (
        1,
        11,
        "all_reduce",
        3,
        0,
    ),
    "public/nccl-tests/oci_8xA100_sxm4_single_node_g8_all_reduce.txt": (1, 28, "all_reduce", 8, 0),
    # nccl-tests#78: no rank list, no NCCL INFO line (world size unknown); both in-place
    # rows print an error of 1e+00 (checked by test_real_footer_blank_redop.py)
    "public/nccl-tests/nccltests78_64xV100_alltoall_OLDFMT_blank_redop_footer_TABLE.txt": (
        1,
        2,
        "alltoall",
        None,
        2,
    ),
    "public/nccl-tests/wohlbier_dgx2_12xV100_all_gather_OLDFMT_FAILED.txt": (
        1,
        31,
        "all_gather",
        12,
        4,
    ),
    "public/nccl-tests/wohlbier_dgx2_12xV100_broadcast_OLDFMT_root_only.txt": (
        1,
        31,
        "broadcast",
        12,
        0,
    ),
    "public/nccl-tests/wohlbier_dgx2_12xV100_reduce_scatter_OLDFMT.txt": (
        1,
        31,
        "reduce_scatter",
        12,
        0,
    ),
}


def test_every_fixture_is_counted() -> None:
    listed = {str(p.relative_to(FIXTURES)) for p in ALL}
    assert listed - set(COUNTS) == {
        "public/nccl-tests/wohlbier_dgx2_5tests_concatenated_log.txt",
        # an excerpt without its footer: test_real_classes.py reads it
        "public/nccl-tests/msccl48_16xA100_alltoall_OLDFMT_blank_redop_EXCERPT.txt",
    }


@pytest.mark.parametrize("rel", sorted(COUNTS))
def test_row_counts(rel: str) -> None:
    tests, lines, op, world, n_errors = COUNTS[rel]
    path = fixture_path(rel)
    runs = parse_log(path.read_text(), str(path))
    assert len(runs) == tests
    assert len(runs[0].lines) == lines
    rows = rows_of(rel)
    assert len(measured(rows)) == 2 * lines
    assert len(rows) == 2 * lines  # no separate error rows: every run here finished
    assert {r.op for r in rows} == {op}
    assert {r.world_size for r in rows} == {world}
    assert len(errors(rows)) == n_errors
    assert all(r.backend == "nccl-tests" and r.kind == "collective" for r in rows)
    assert all(r.source == str(path) for r in rows)
    # Out-of-place first, then in-place, for every size.
    assert [r.in_place for r in rows[:4]] == [False, True, False, True]
    if not rel.endswith(".json"):
        assert len(data_lines(path.read_text())) == lines


# --------------------------------------------------- every number of the h200x2 text fixtures


@pytest.mark.parametrize("path", H200_TEXT, ids=lambda p: p.name)
def test_every_number_of_h200x2_text(path: Path) -> None:
    text = path.read_text()
    rows = measured(rows_from_log(text, str(path)))
    lines = data_lines(text)
    per_iter = "per-iter" in path.name
    assert len(rows) == 2 * len(lines)
    for k, toks in enumerate(lines):
        oop, inp = rows[2 * k], rows[2 * k + 1]
        assert (oop.in_place, inp.in_place) == (False, True)
        for r in (oop, inp):
            assert [str(r.size_bytes), str(r.count), r.dtype, r.redop, str(r.root)] == toks[:5]
        width = 8 if per_iter else 4
        assert half_tokens(oop) == toks[5:9]
        assert half_tokens(inp) == toks[5 + width : 9 + width]
        if per_iter:
            for r, start in ((oop, 9), (inp, 9 + width)):
                assert r.extra["i_min_us"] == float(toks[start])
                assert r.extra["i_max_us"] == float(toks[start + 1])
                assert r.time_us_p99 == float(toks[start + 2])
                assert r.extra["i_cv_pct"] == float(toks[start + 3])


def test_h200x2_all_reduce_rows_exactly() -> None:
    rows = measured(rows_of("h200x2/nccl-tests-all_reduce.txt"))
    first, last = rows[0], rows[-2]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (
        8,
        2,
        "float",
        "sum",
        -1,
    )
    assert (first.time_us, first.algbw_gbps, first.busbw_gbps, first.wrong) == (19.12, 0, 0, 0)
    assert rows[1].time_us == 18.34 and rows[1].in_place is True
    assert (last.size_bytes, last.count) == (8589934592, 2147483648)
    assert (last.time_us, last.algbw_gbps, last.busbw_gbps, last.wrong) == (
        24869.3,
        345.40,
        345.40,
        0,
    )
    assert rows[-1].time_us == 24733.2 and rows[-1].busbw_gbps == 347.30
    assert rows[-4].time_us == 12470.2 and rows[-3].time_us == 12454.1
    assert all(r.status == "ok" and r.error is None for r in rows)
    assert all(r.graph is False and r.iters == 20 for r in rows)
    assert first.host == "vm" and first.nodes == 1 and first.build == "vm"
    assert first.versions["nccl"] == "2.28.3" and first.versions["nccl_tests"] == "2.19.6"
    assert first.versions["gpu"] == "NVIDIA H200"


def test_h200x2_other_collectives_exactly() -> None:
    ag = measured(rows_of("h200x2/nccl-tests-all_gather.txt"))
    assert [(r.size_bytes, r.count, r.time_us) for r in ag[:4]] == [
        (0, 0, 0.55),
        (0, 0, 0.47),
        (0, 0, 0.47),
        (0, 0, 0.43),
    ]
    assert (ag[-2].time_us, ag[-2].algbw_gbps, ag[-2].busbw_gbps) == (14652.5, 586.24, 293.12)
    assert ag[-2].redop == "none" and ag[-2].root == -1
    rs = measured(rows_of("h200x2/nccl-tests-reduce_scatter.txt"))
    assert (rs[-1].time_us, rs[-1].algbw_gbps, rs[-1].busbw_gbps) == (14504.6, 592.22, 296.11)
    bc = measured(rows_of("h200x2/nccl-tests-broadcast.txt"))
    assert bc[0].root == 0 and bc[0].redop == "none"
    assert (bc[-2].time_us, bc[-2].busbw_gbps) == (23285.1, 368.90)
    p2p = measured(rows_of("h200x2/nccl-tests-all_reduce-p2p-disabled.txt"))
    assert (p2p[-2].time_us, p2p[-2].busbw_gbps, p2p[-1].time_us) == (154383, 27.82, 153963)
    bf = measured(rows_of("h200x2/nccl-tests-all_reduce-bf16.txt"))
    assert {r.dtype for r in bf} == {"bfloat16"} and bf[-1].busbw_gbps == 331.44


# --------------------------------------------------------------- text and JSON, same rows

_COMPARED = (
    "op",
    "world_size",
    "dtype",
    "redop",
    "root",
    "in_place",
    "size_bytes",
    "count",
    "graph",
    "iters",
    "wrong",
    "status",
    "host",
    "nodes",
)


@pytest.mark.parametrize("name", ["all_reduce", "all_gather"])
def test_text_and_json_give_the_same_rows(name: str) -> None:
    text_rows = rows_of(f"h200x2/nccl-tests-{name}.txt")
    json_rows = rows_of(f"h200x2/nccl-tests-{name}.json")
    assert len(text_rows) == len(json_rows) == 62
    for t, j in zip(text_rows, json_rows, strict=True):
        for key in _COMPARED:
            if key in ("host", "nodes"):
                continue  # the JSON lists one device line per process only
            assert getattr(t, key) == getattr(j, key), key
        # The JSON keeps full precision; printed as nccl-tests prints it, it is the text.
        assert half_tokens(j) == half_tokens(t)
        assert j.versions["nccl"] == t.versions["nccl"] == "2.28.3"
    j0 = json_rows[0]
    assert j0.time_us == pytest.approx(19.11805 if name == "all_reduce" else 0.553)
    assert j0.extra["nccl_tests"]["format"] == "json"
    assert j0.env == {"NCCL_NVLS_ENABLE": "0", "NCCL_VERSION": "2.28.3-1"}


# ------------------------------------------------------------------ public fixtures


def test_public_new_format_numbers_and_ranks() -> None:
    rel = "public/nccl-tests/a3mega_2node_16xH100_mpirun_all_reduce_8G.txt"
    run = parse_text(fixture_path(rel).read_text())[0]
    assert len(run.header.ranks) == 16 and run.world_size == 16 and run.header.nodes() == 2
    assert run.header.ranks[8].host == "ztan-mig-gq73" and run.header.ranks[8].device == 0
    assert run.header.ranks[15].bus_id == "0000:8c:00"
    assert run.header.ranks[0].gpu == "NVIDIA H100 80GB HBM3"
    assert run.avg_busbw_gbps == 70.742
    rows = measured(rows_of(rel))
    assert (rows[0].time_us, rows[0].busbw_gbps, rows[1].time_us) == (135.8, 0.00, 123.5)
    assert rows[0].nodes == 2 and rows[0].host == "ztan-mig-235z"
    oci = parse_text(
        fixture_path("public/nccl-tests/oci_8xA100_sxm4_single_node_g8_all_reduce.txt").read_text()
    )[0]
    assert oci.world_size == 8 and {r.pid for r in oci.header.ranks} == {944}
    assert oci.header.ranks[2].bus_id == "0x51"


def test_public_alltoall_na_in_place_and_size_zero() -> None:
    rows = measured(rows_of("public/nccl-tests/autodl_2x2080ti_alltoall_pcie.txt"))
    assert rows[0].size_bytes == 0 and rows[2].size_bytes == 0
    assert [r.wrong for r in rows[:2]] == [0, None]  # in-place #wrong printed as N/A
    assert all(r.wrong is None for r in rows if r.in_place)
    assert all(r.status == "ok" for r in rows)
    assert rows[0].redop == "none" and rows[0].root == -1


def test_public_validation_off_and_step_bytes() -> None:
    rel = "public/nccl-tests/likejazz_3node_T4_all_reduce_validation0_NA.txt"
    run = parse_text(fixture_path(rel).read_text())[0]
    assert run.header.validation == 0 and run.header.step_bytes == 1048576
    assert run.header.step_factor is None and run.columns is not None
    assert run.columns.groups[0][-1] == "error"
    rows = measured(rows_of(rel))
    assert all(r.wrong is None for r in rows)
    assert (rows[0].size_bytes, rows[0].time_us, rows[0].algbw_gbps, rows[0].busbw_gbps) == (
        104857600,
        202872,
        0.52,
        0.69,
    )
    assert rows[0].nodes == 3 and rows[0].world_size == 3


def test_public_old_format_without_redop_root_and_error_column() -> None:
    rel = "public/nccl-tests/wohlbier_dgx2_12xV100_broadcast_OLDFMT_root_only.txt"
    run = parse_text(fixture_path(rel).read_text())[0]
    assert run.columns is not None and run.columns.pre == ["size", "count", "type", "root"]
    assert run.header.ranks[11].bus_id == "0xe7" and run.header.ranks[11].group is None
    assert run.header.agg_iters is None and run.header.graph_launches is None
    rows = measured(rows_of(rel))
    assert rows[0].redop == "none" and rows[0].root == 0  # broadcast does not reduce
    assert rows[0].wrong == 0 and rows[0].extra["max_error"] == 0.0
    rs = measured(rows_of("public/nccl-tests/wohlbier_dgx2_12xV100_reduce_scatter_OLDFMT.txt"))
    assert rs[0].redop == "sum" and rs[0].root == -1
    ag = measured(rows_of("public/nccl-tests/wohlbier_dgx2_12xV100_all_gather_OLDFMT_FAILED.txt"))
    assert (ag[6].size_bytes, ag[6].count, ag[6].redop, ag[6].root) == (48, 1, "none", -1)
    assert (ag[-2].time_us, ag[-2].busbw_gbps, ag[-1].time_us) == (106773, 73.75, 70089)


def test_public_failed_run_out_of_bounds_rows() -> None:
    rel = "public/nccl-tests/wohlbier_dgx2_12xV100_all_gather_OLDFMT_FAILED.txt"
    run = parse_text(fixture_path(rel).read_text())[0]
    assert (run.out_of_bounds, run.out_of_bounds_ok) == (4, False)
    bad = errors(rows_of(rel))
    assert [(r.size_bytes, r.in_place) for r in bad] == [
        (4294967280, False),
        (4294967280, True),
        (8589934560, False),
        (8589934560, True),
    ]
    assert all(r.wrong == 1 and r.extra["max_error"] == 1.0 for r in bad)
    assert all("out of bounds" in (r.error or "") for r in bad)
    assert all(r.time_us is not None for r in bad)  # measured, but wrong


def test_public_interleaved_nccl_info_line() -> None:
    rel = "public/nccl-tests/azureml_4xK80_all_reduce_OLDFMT_nccl_info_interleaved.txt"
    rows = measured(rows_of(rel))
    assert rows[0].size_bytes == 33554432 and rows[0].time_us == 19902
    assert rows[-1].time_us == 1258876 and rows[-1].busbw_gbps == 2.56
    assert rows[0].wrong == 0 and rows[0].extra["max_error"] == 2e-07  # within the bound
    assert rows[0].host == "2e3f9af7241040529530e810ce60fe5d000002"


def test_public_fragment_and_elided_are_clearly_partial() -> None:
    rel = "public/nccl-tests/coreweave_gb200_20racks_1440ranks_all_reduce_FRAGMENT.txt"
    run = parse_text(fixture_path(rel).read_text())[0]
    assert [r.rank for r in run.header.ranks] == [1439] and run.world_size is None
    assert run.header.ranks[0].gpu == "NVIDIA GB200"
    rows = measured(rows_of(rel))
    assert rows[-2].size_bytes == 17179869184 and rows[-2].count == 4294967296
    assert rows[-2].host is None and rows[0].world_size is None
    assert rows[0].extra["nccl_tests"]["ranks_listed"] == 1
    el = parse_text(
        fixture_path("public/nccl-tests/coreweave_h100_64gpu_sharp_mpijob_ELIDED.txt").read_text()
    )[0]
    assert el.header.devices_elided and el.world_size is None
    assert el.op == "all_reduce" and el.op_source == "table"
    assert el.header.warmup_iters == 50 and el.header.iters == 50


def test_public_concatenated_log() -> None:
    rel = "public/nccl-tests/wohlbier_dgx2_5tests_concatenated_log.txt"
    path = fixture_path(rel)
    runs = parse_log(path.read_text(), str(path))
    assert [r.op for r in runs] == [
        "all_gather",
        "all_reduce",
        "broadcast",
        "reduce",
        "reduce_scatter",
    ]
    assert all(r.op_source == "command" for r in runs)
    assert [len(r.lines) for r in runs] == [31] * 5
    assert [r.avg_busbw_gbps for r in runs] == [30.2993, 42.5578, 41.2456, 41.3386, 20.3609]
    assert runs[0].header.env["CUDA_VISIBLE_DEVICES"] == "1,2,6,7,8,9,10,11,12,13,14,15"
    rows = rows_from_log(path.read_text(), str(path))
    assert len(rows) == 5 * 62 and len(errors(rows)) == 4
    assert len({r.run_id for r in rows}) == 5
    reduce_rows = [r for r in rows if r.op == "reduce"]
    assert reduce_rows[0].root == 0 and reduce_rows[0].redop == "sum"
    assert rows[0].env == {"CUDA_VISIBLE_DEVICES": "1,2,6,7,8,9,10,11,12,13,14,15"}
    # The same rows as the single-test files.
    single = rows_of("public/nccl-tests/wohlbier_dgx2_12xV100_reduce_scatter_OLDFMT.txt")
    got = [r for r in rows if r.op == "reduce_scatter"]
    assert [(r.size_bytes, r.time_us, r.busbw_gbps) for r in got] == [
        (r.size_bytes, r.time_us, r.busbw_gbps) for r in single
    ]


def test_op_from_option_and_unknown() -> None:
    text = fixture_path("public/nccl-tests/autodl_2x2080ti_all_gather_pcie.txt").read_text()
    assert {r.op for r in rows_from_log(text, "x.txt")} == {"unknown"}
    assert {r.op for r in rows_from_log(text, "x.txt", op="alltoall")} == {"alltoall"}
    # The log's own header wins over the option.
    t2 = fixture_path("h200x2/nccl-tests-broadcast.txt").read_text()
    assert {r.op for r in rows_from_log(t2, "x.txt", op="alltoall")} == {"broadcast"}


# ------------------------------------------------------------------- not nccl-tests


@pytest.mark.parametrize(
    "rel",
    [
        "h200x2/topo-m.txt",
        "public/vllm/vllm_readme_benchmark_throughput_sonnet.txt",
        "public/bandwidthtest/autodl_2080ti_bandwidthTest.txt",
    ],
)
def test_other_files_are_parse_errors(rel: str) -> None:
    path = fixture_path(rel)
    with pytest.raises(ParseError) as info:
        rows_from_log(path.read_text(), str(path))
    assert str(path) in str(info.value) and "not nccl-tests output" in str(info.value)


@pytest.mark.parametrize("text", ["", "\n\n", "{}", "[1, 2]", '{"a": 1}', "{", "hello"])
def test_empty_and_odd_inputs(text: str) -> None:
    with pytest.raises(ParseError):
        parse_log(text, "odd")


# ------------------------------------------------------------------------- fuzzing

_SOURCES = [p.read_text() for p in ALL]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(_SOURCES))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(0, 6))):
        if not lines:
            break
        op = draw(st.integers(0, 6))
        i = draw(st.integers(0, len(lines) - 1))
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[draw(st.integers(0, len(lines) - 1))])
        elif op == 2:
            j = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:j]
        elif op == 3:
            j = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:j] + draw(st.text(max_size=12)) + lines[i][j:]
        elif op == 4:
            toks = lines[i].split()
            if toks:
                k = draw(st.integers(0, len(toks) - 1))
                toks[k] = draw(
                    st.sampled_from(
                        ["N/A", "-1", "nan", "inf", "1e+99", "9" * 40, "", "#wrong", "é", "0x1f"]
                    )
                )
                lines[i] = "  ".join(toks) + "\n"
        elif op == 5:
            lines = lines[: i + 1]
        else:
            lines.insert(
                i,
                draw(
                    st.sampled_from(
                        [
                            "vm: Test NCCL failure common.cu:1 'x'\n",
                            "Segmentation fault (core dumped)\n",
                            " .. vm pid 1: Test failure common.cu:2\n",
                            "# Out of bounds values : x\n",
                            "#  Rank 99 Group 0 Pid 1 on h device 0 [0:0:0] G\n",
                            "...\n",
                            "# nThread 1 nGpus\n",
                            "#  size count type time algbw busbw\n",
                            '{"results": [{"size": 1}\n',
                        ]
                    )
                ),
            )
    return "".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_fuzz_only_parse_errors(text: str) -> None:
    try:
        rows = rows_from_log(text, "fuzz.txt")
    except ParseError:
        return
    assert_rows_only_from_the_text(rows, text)


# The figures of a measured row that nccl-tests prints (or writes in -J JSON) itself.
READ_FIELDS = ("size_bytes", "count", "time_us", "algbw_gbps", "busbw_gbps", "wrong")
NUMBER_TOKEN = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def assert_rows_only_from_the_text(rows: list[Row], text: str) -> None:
    """Every figure a row holds was printed in the text, and every row is ok or an error
    that says what went wrong (a cut or damaged run is reported, never dropped silently)."""
    said = {float(t) for t in NUMBER_TOKEN.findall(text)}
    for row in rows:
        json.dumps(row.to_dict(), default=str)
        assert row.status in ("ok", "error")
        if row.status == "error":
            assert row.error
        for name in READ_FIELDS:
            value = getattr(row, name)
            if value is None or (name == "wrong" and value == 0 and row.status == "error"):
                continue
            assert float(value) in said or any(
                abs(float(value) - s) <= 1e-9 * max(1.0, abs(s)) for s in said
            ), f"{name}={value} is not a number of the text"


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=400) | mutated().map(lambda t: t[: len(t) // 3]))
def test_fuzz_random_text(text: str) -> None:
    try:
        rows = rows_from_log(text, "fuzz.txt")
    except ParseError as err:
        assert str(err).startswith("fuzz.txt")
        return
    assert_rows_only_from_the_text(rows, text)


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_runs_handed_over_in_parts_give_the_same_rows(path: Path) -> None:
    # A table longer than the hand-over limit goes out in parts (memory holds one part):
    # the same rows, only the summary facts (read after the table) are missing from the
    # rows of the parts handed over before it.
    def plain(row: Row) -> dict[str, object]:
        data = row.to_dict()
        data.pop("started_at")
        facts = data["extra"].pop("nccl_tests")
        return {**data, "test": facts["test_index"]}

    whole = rows_from_file(path)
    parts = list(iter_rows(iter_runs(path, hand_over=3), source=str(path)))
    assert [plain(r) for r in parts] == [plain(r) for r in whole]
    assert parts[-1].extra["nccl_tests"] == whole[-1].extra["nccl_tests"]
