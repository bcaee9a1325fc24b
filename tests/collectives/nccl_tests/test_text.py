"""nccl-tests' text output: its header, failures, cut-off runs and odd tables."""

from __future__ import annotations

from gpulane.collectives.nccl_tests.logs import rows_from_log
from gpulane.collectives.nccl_tests.text import parse_text
from tests.collectives.nccl_tests.common import (
    MPI_REAL,
    REAL,
    cut_at,
    errors,
    measured,
    rows_of,
)
from tests.conftest import fixture_path


def test_h200x2_header_facts() -> None:
    path = fixture_path("h200x2/nccl-tests-all_reduce.txt")
    (run,) = parse_text(path.read_text(), str(path))
    h = run.header
    assert (h.version, h.nccl_headers, h.nccl_library, h.nccl_version) == (
        "2.19.6",
        22803,
        22803,
        "2.28.3",
    )
    assert h.test == "all_reduce_perf" and run.op_source == "header"
    assert (h.nthreads, h.ngpus, h.min_bytes, h.max_bytes, h.step_factor) == (
        1,
        2,
        8,
        8589934592,
        2,
    )
    assert (h.warmup_iters, h.iters, h.agg_iters, h.validation, h.graph_launches, h.unalign) == (
        5,
        20,
        1,
        1,
        0,
        0,
    )
    assert [r.to_dict() for r in h.ranks] == [
        {
            "rank": 0,
            "group": 0,
            "pid": 1575,
            "host": "vm",
            "device": 0,
            "bus_id": "0000:00:06",
            "gpu": "NVIDIA H200",
        },
        {
            "rank": 1,
            "group": 0,
            "pid": 1575,
            "host": "vm",
            "device": 1,
            "bus_id": "0000:00:07",
            "gpu": "NVIDIA H200",
        },
    ]
    assert h.json_output == "/tmp/logs/nt-all_reduce-default.json"
    assert (run.out_of_bounds, run.out_of_bounds_ok, run.avg_busbw_gbps) == (0, True, 110.807)
    assert run.concluded and run.finished and not run.errors
    facts = measured(rows_from_log(path.read_text(), str(path)))[0].extra["nccl_tests"]
    assert facts["avg_busbw_gbps"] == 110.807 and facts["out_of_bounds"] == 0
    assert facts["ranks"][1]["bus_id"] == "0000:00:07" and facts["gpus"] == ["NVIDIA H200"]


def test_h200x2_graph_mpi_and_per_iter_headers() -> None:
    graph = rows_of("h200x2/nccl-tests-all_reduce-graph.txt")
    assert all(r.graph is True for r in graph) and graph[0].time_us == 5.70
    assert graph[0].extra["nccl_tests"]["graph_launches"] == 20
    mpi = parse_text(fixture_path("h200x2/nccl-tests-mpi-all_reduce.txt").read_text())[0]
    assert mpi.header.ngpus == 1 and [r.pid for r in mpi.header.ranks] == [1553, 1554]
    assert mpi.world_size == 2
    it = parse_text(fixture_path("h200x2/nccl-tests-all_reduce-per-iter.txt").read_text())[0]
    assert it.header.per_iter and it.columns is not None
    assert it.columns.groups[0] == [
        "time",
        "algbw",
        "busbw",
        "wrong",
        "i_min",
        "i_max",
        "i_p99",
        "i_cv",
    ]


def test_nccl_failure_glued_to_the_line_it_interrupted() -> None:
    # NCCLCHECK prints "host: Test NCCL failure file:line 'error / last error'" right after
    # the preamble printf of the size it was measuring; TESTCHECK then traces the stack.
    head, line = cut_at(REAL, "1048576")
    preamble = line[: line.index("-1") + 2]
    log = (
        head
        + preamble
        + "vm: Test NCCL failure common.cu:408 'unhandled cuda error (run with NCCL_DEBUG=INFO "
        "for details) / Cuda failure 'out of memory''\n"
        " .. vm pid 1575: Test failure common.cu:589\n"
        " .. vm pid 1575: Test failure common.cu:773\n"
    )
    rows = rows_from_log(log, "fail.txt")
    assert len(measured(rows)) == 2 * 17  # 8 B .. 512 KiB kept
    (err,) = errors(rows)
    assert err.size_bytes == 1048576 and err.in_place is False and err.count == 262144
    assert err.time_us is None and err.op == "all_reduce"
    assert err.error is not None
    assert "all_reduce_perf failed at 1048576 B out-of-place" in err.error
    assert "Test NCCL failure common.cu:408 on vm" in err.error
    assert "out of memory" in err.error and "Test failure common.cu:589" in err.error
    assert err.extra["event"] == "nccl"


def test_cuda_failure_after_out_of_place_half() -> None:
    head, line = cut_at(REAL, "2097152")
    half = line[: line.index("0    ", 60) + 1]  # the out-of-place half was printed
    log = head + half + "vm: Test CUDA failure common.cu:892 'an illegal memory access'\n"
    rows = rows_from_log(log, "fail.txt")
    kept = measured(rows)
    assert len(kept) == 2 * 18 + 1 and kept[-1].size_bytes == 2097152
    assert kept[-1].in_place is False and kept[-1].time_us == 29.97
    (err,) = errors(rows)
    assert (err.size_bytes, err.in_place) == (2097152, True)
    assert "Test CUDA failure common.cu:892" in (err.error or "")


def test_mpi_abort_and_interleaved_warnings() -> None:
    head, _ = cut_at(MPI_REAL, "4096")
    log = (
        head
        + "vm:1553:1560 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
        + "vm:1554:1554 [1] transport/p2p.cc:275 NCCL WARN Cuda failure 'invalid argument'\n"
        + "vm: Test NCCL failure common.cu:1093 'unhandled cuda error / Cuda failure'\n"
        + "vm: Test NCCL failure common.cu:1093 'unhandled cuda error / Cuda failure'\n"
        + "--------------------------------------------------------------------------\n"
        + "Primary job  terminated normally, but 1 process returned\n"
        + "a non-zero exit code. Per user-direction, the job has been aborted.\n"
        + "--------------------------------------------------------------------------\n"
        + "mpirun detected that one or more processes exited with non-zero status, thus "
        "causing\n"
    )
    rows = rows_from_log(log, "mpi.txt")
    assert len(measured(rows)) == 2 * 9
    errs = errors(rows)
    assert [e.extra["event"] for e in errs] == ["nccl", "abort"]
    assert "(reported 2 times)" in (errs[0].error or "")
    assert "last NCCL WARN: Cuda failure 'invalid argument'" in (errs[0].error or "")
    assert "Primary job" in (errs[1].error or "") and "mpirun detected" in (errs[1].error or "")


def test_cut_off_log_keeps_rows_and_says_so() -> None:
    head, line = cut_at(REAL, "65536")
    rows = rows_from_log(head, "cut.txt")
    assert len(measured(rows)) == 2 * 13
    (err,) = errors(rows)
    assert err.extra["event"] == "cut_off"
    assert "after 32768 B" in (err.error or "") and "cut off" in (err.error or "")
    # Cut in the middle of a line, after the blank that ends the out-of-place half: that
    # half is kept.
    rows = rows_from_log(head + line[: line.index("0    ", 60) + 2], "cut.txt")
    assert len(measured(rows)) == 2 * 13 + 1
    (err,) = errors(rows)
    assert (err.size_bytes, err.in_place) == (65536, True)
    # Cut right after its last digit: that "0" may be the head of "01..", so the half is
    # not taken (no number that the file may not hold), and the cut is at out-of-place.
    rows = rows_from_log(head + line[: line.index("0    ", 60) + 1], "cut.txt")
    assert len(measured(rows)) == 2 * 13
    (err,) = errors(rows)
    assert (err.size_bytes, err.in_place) == (65536, False)
    # Cut before the table.
    rows = rows_from_log(REAL.split("#       size")[0], "cut.txt")
    (err,) = rows
    assert "before its result table" in (err.error or "") and err.time_us is None


def test_line_split_by_interleaved_output_is_joined() -> None:
    head, line = cut_at(REAL, "131072")
    rest = REAL[len(head) + len(line) :]
    # Another process's output lands between two printf calls of nccl-tests: right after
    # the out-of-place half, with the in-place half on the next line.
    cut = line.index("0    ", 60) + 1
    split = (
        line[:cut]
        + "vm:1575:1590 [1] NCCL INFO comm 0x5 rank 1 nRanks 2 - Init COMPLETE\n"
        + line[cut:]
    )
    rows = measured(rows_from_log(head + split + rest, "x.txt"))
    assert len(rows) == 62
    r = [x for x in rows if x.size_bytes == 131072]
    assert [(x.time_us, x.busbw_gbps) for x in r] == [(20.29, 6.46), (20.30, 6.46)]


def test_usage_failure_before_the_table() -> None:
    head = REAL.split("#\n#   ")[0]
    log = (
        head + "Invalid number of GPUs: 4 requested but only 2 were found.\n"
        "Please check the number of processes and GPUs per process.\n"
    )
    (err,) = rows_from_log(log, "x.txt")
    assert err.status == "error" and "refused to run" in (err.error or "")
    assert "Invalid number of GPUs: 4 requested but only 2 were found." in (err.error or "")


def test_wrong_results_new_format() -> None:
    lines = REAL.splitlines(keepends=True)
    k = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["1024"])
    lines[k] = lines[k][:-2] + "3\n"  # 3 wrong elements in-place
    text = "".join(lines).replace("Out of bounds values : 0 OK", "Out of bounds values : 1 FAILED")
    rows = rows_from_log(text, "x.txt")
    (bad,) = errors(rows)
    assert (bad.size_bytes, bad.in_place, bad.wrong) == (1024, True, 3)
    assert bad.error == "3 wrong elements (nccl-tests #wrong)"
    # A FAILED summary that no row explains still becomes an error row.
    text2 = REAL.replace("Out of bounds values : 0 OK", "Out of bounds values : 2 FAILED")
    (extra_err,) = errors(rows_from_log(text2, "x.txt"))
    assert "2 out-of-bounds values" in (extra_err.error or "")


def test_per_iteration_timestamps_and_cputime_columns() -> None:
    # -C 1 -S 1: writeResultHeader's labels, writeTimestamp's "%21s" date after in-place.
    text = (
        "# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803\n"
        "# Collective test starting: sendrecv_perf\n"
        "# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 1 iters: 2 "
        "agg iters: 1 validation: 1 graph: 0 unalign: 0\n"
        "#\n# Using devices\n"
        "#  Rank  0 Group  0 Pid   1575 on         vm device  0 [0000:00:06] NVIDIA H200\n"
        "#  Rank  1 Group  0 Pid   1575 on         vm device  1 [0000:00:07] NVIDIA H200\n#\n"
        "#                                                              out-of-place"
        "                       in-place          \n"
        "#       size         count      type   redop    root  cputime   algbw   busbw  #wrong"
        "  cputime   algbw   busbw  #wrong            timestamp\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
        "     (us)  (GB/s)  (GB/s)          %Y-%m-%d %H:%M:%S\n"
        "           8             2     float    none      -1    10.00    0.00    0.00       0"
        "    11.00    0.00    0.00       0  2026-11-22 10:00:01\n"
        "          16             4     float    none      -1    10.50    0.00    0.00       0"
        "    11.50    0.00    0.00       0  2026-11-22 10:00:02\n"
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.00123 \n#\n"
        "# Collective test concluded: sendrecv_perf\n"
    )
    rows = rows_from_log(text, "x.txt")
    assert len(rows) == 4 and {r.op for r in rows} == {"sendrecv"}
    assert rows[1].time_us == 11.0 and rows[1].extra["cputime"] is True
    assert rows[3].extra["timestamp"] == "2026-11-22 10:00:02"


def test_thousands_of_ranks_in_the_header() -> None:
    # The FRAGMENT's device line, for every one of its 1440 ranks (4 GPUs per GB200 host).
    frag = fixture_path(
        "public/nccl-tests/coreweave_gb200_20racks_1440ranks_all_reduce_FRAGMENT.txt"
    ).read_text()
    devices = "".join(
        f"#  Rank {r:2d} Group  0 Pid {21000 + r:6d} on slurm-gb200-{r // 4:03d} device "
        f"{r % 4:2d} [0x01] NVIDIA GB200\n"
        for r in range(1440)
    )
    head = (
        "# nThread 1 nGpus 1 minBytes 536870912 maxBytes 17179869184 step: 2(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
    )
    text = head + devices + frag.split("\n", 1)[1]
    (run,) = parse_text(text, "gb200.txt")
    assert run.world_size == 1440 and run.header.nodes() == 360
    rows = measured(rows_from_log(text, "gb200_all_reduce.txt"))
    assert len(rows) == 12 and rows[0].world_size == 1440 and rows[0].nodes == 360
    facts = rows[0].extra["nccl_tests"]
    assert "ranks" not in facts and facts["ranks_listed"] == 1440
    assert len(facts["hosts"]) == 64 and facts["gpus"] == ["NVIDIA GB200"]


# Recorded on the GPU machine (nvidia-h200-x2, nccl-tests 2.19.6, NCCL 2.28.3) by
# benchmarks/nccl_tests/record.sh: preset=socket with NCCL_SOCKET_IFNAME=nosuchif0.
REAL_FAILURE = """\
# Writing JSON output to /root/out/runs/20261122-005820-broken-39de/nccl-tests-all_reduce-float.json
# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 2 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 \
agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4158 on         vm device  0 [0000:00:06] NVIDIA H200
#  Rank  1 Group  0 Pid   4158 on         vm device  1 [0000:00:07] NVIDIA H200
vm: Test NCCL failure common.cu:1550 'invalid usage (run with NCCL_DEBUG=WARN for details) / '
 .. vm pid 4158: Test failure common.cu:1454
"""


def test_real_failure_recorded_on_the_gpu_machine() -> None:
    (row,) = rows_from_log(REAL_FAILURE, "broken.log")
    assert row.status == "error" and row.op == "all_reduce" and row.world_size == 2
    # The error names the file and the line of the failure message (line 9).
    assert row.error == (
        "broken.log:9: all_reduce_perf failed: Test NCCL failure common.cu:1550 on vm: 'invalid usage (run "
        "with NCCL_DEBUG=WARN for details) / ' [Test failure common.cu:1454 (pid 4158 on vm)]; "
        "rerun with NCCL_DEBUG=WARN (or INFO) to see NCCL's reason"
    )
