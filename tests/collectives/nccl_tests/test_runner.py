"""backend=nccl_tests: command lines, finding the binaries, and what a run makes of a
binary's output and exit status.

CI has no GPU and no nccl-tests, so the binaries here are STAND-INS: small scripts that
this test writes into tmp_path under nccl-tests' names (all_reduce_perf, ...). A stand-in
records its command line, answers ``-h`` like nccl-tests (with or without ``-J``), prints a
REAL captured nccl-tests log from tests/fixtures (h200x2 or public), copies the real -J JSON
of the same run where asked, and exits with a chosen status (or hangs, or dies by a
signal). The same code was run against the real nccl-tests on the 2x H200 machine; that
run is recorded in benchmarks/nccl_tests/README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from gpulane.collectives.nccl_tests import args as nt_args
from gpulane.collectives.nccl_tests import binaries as nt_binaries
from gpulane.collectives.plan import build_plan
from gpulane.config.commands import SweepConfig
from gpulane.config.load import typed
from gpulane.errors import InputError, MissingComponent
from gpulane.parquet_rows import read_parquet
from gpulane.rundir import RunDir
from gpulane.session.nccl_tests import run_nccl_tests
from gpulane.session.prepare import prepare
from tests.conftest import fixture_path
from tests.helpers import gpulane, rows_of, run_dirs

HELP_JSON = """USAGE: ./build/all_reduce_perf
	[-t,--nthreads <num threads>]
	[-g,--ngpus <gpus per thread>]
	[-b,--minbytes <min size in bytes>]
	[-G,--cudagraph <num graph launches>]
	[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix (only json supported presently.)]
	[-I,--per_iter_timing <0/1> per-iteration CUDA event timing
	[-h,--help]
"""
HELP_TEXT_ONLY = """USAGE: ./build/all_reduce_perf
	[-t,--nthreads <num threads>]
	[-g,--ngpus <gpus per thread>]
	[-h,--help]
"""

STAND_IN = """#!{python}
# Stand-in for an nccl-tests binary (see the test module's docstring).
import json, os, shutil, signal, sys, time
from pathlib import Path

me = Path(__file__)
spec = json.loads(Path(str(me) + ".json").read_text())
with open(me.parent / "calls.log", "a") as fh:
    fh.write(json.dumps(sys.argv) + "\\n")
if "-h" in sys.argv[1:]:
    print(spec["help"], end="")
    sys.exit(0)
text = Path(spec["fixture"]).read_text() if spec.get("fixture") else ""
lines = text.splitlines(keepends=True)
if "-J" in sys.argv:
    path = sys.argv[sys.argv.index("-J") + 1]
    if spec.get("json"):
        shutil.copy(spec["json"], path)
    lines = [ln for ln in lines if not ln.startswith("# Writing JSON output to")]
    lines.insert(0, "# Writing JSON output to " + path + "\\n")
if spec.get("one_rank"):  # a plain (not MPI=1) build under mpirun: each process alone
    lines = [ln for ln in lines if not ln.startswith("#  Rank  1 ")]
if spec.get("cut_before"):
    k = next(i for i, ln in enumerate(lines) if ln.split()[:1] == [spec["cut_before"]])
    lines = lines[:k]
out = "".join(lines) * spec.get("times", 1) + spec.get("append", "")
sys.stdout.write(out)
sys.stdout.flush()
if spec.get("sleep"):
    time.sleep(spec["sleep"])
if spec.get("signal"):
    os.kill(os.getpid(), getattr(signal, spec["signal"]))
sys.exit(spec.get("status", 0))
"""

FAKE_MPIRUN = """#!{python}
# Stand-in for Open MPI's mpirun: says it is Open MPI, records its command line, then runs
# the program after its options once per process (FAKE_MPIRUN_PROCS, default 1: an
# MPI-built nccl-tests whose rank 0 prints for the world), each with its rank variable.
import json, os, subprocess, sys
from pathlib import Path

if "--version" in sys.argv:
    print("mpirun (Open MPI) 4.1.4")
    sys.exit(0)
me = Path(__file__)
with open(me.parent / "mpirun.log", "a") as fh:
    fh.write(json.dumps(sys.argv) + "\\n")
args = sys.argv[1:]
k = args.index("sh") if "sh" in args else next(i for i, a in enumerate(args) if a.endswith("_perf"))
code = 0
for rank in range(int(os.environ.get("FAKE_MPIRUN_PROCS", "1"))):
    env = dict(os.environ, OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE="1")
    code = subprocess.call(args[k:], env=env) or code
sys.exit(code)
"""


def _write_exe(path: Path, body: str) -> Path:
    path.write_text(body.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def stand_in(home: Path, name: str, **spec: Any) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    spec.setdefault("help", HELP_JSON)
    for key in ("fixture", "json"):
        if key in spec and spec[key] is not None:
            spec[key] = str(fixture_path(spec[key]))
    (home / f"{name}.json").write_text(json.dumps(spec))
    return _write_exe(home / name, STAND_IN)


def calls(home: Path) -> list[list[str]]:
    path = home / "calls.log"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def make_cfg(home: Path | None, **over: Any) -> Any:
    data: dict[str, Any] = {
        "collectives": ["all_reduce"],
        "sizes": {"min": 8, "max": "8G", "factor": 2, "step": None},
        "dtype": "float",
        "redop": "sum",
        "root": 0,
        "in_place": "both",
        "warmup": 5,
        "iters": 20,
        "check_iters": 1,
        "graph": False,
        "graph_launches": 10,
        "world_size": 2,
        "device": "cuda",
        "build": "test",
        "run_id": "r1",
        "nodes": 1,
        "path": None,
        "timeout_s": 60,
        "progress": False,
        "backend": {
            "name": "nccl_tests",
            "home": None if home is None else str(home),
            "extra_args": [],
            "use_json": "auto",
            "per_iter": False,
        },
        "launcher": {"name": "local"},
    }
    for key, value in over.items():
        node = data
        parts = key.split(".")
        for p in parts[:-1]:
            node = node[p]
        node[parts[-1]] = value
    return typed(data, SweepConfig)


def run_dir(tmp_path: Path) -> RunDir:
    path = tmp_path / "runs" / "r1"
    path.mkdir(parents=True)
    return RunDir("r1", path, "test")


@pytest.fixture(autouse=True)
def _fresh_help_cache() -> None:
    nt_binaries._HELP_CACHE.clear()


# ------------------------------------------------------------------------ command lines


def test_command_line_from_the_sweep_config(tmp_path: Path) -> None:
    cfg = make_cfg(None)
    plan = build_plan(cfg, True)
    assert nt_args.test_args(cfg, plan, "all_reduce", "float", 2) == [
        "-b", "8", "-e", "8589934592", "-f", "2", "-g", "2", "-n", "20", "-w", "5",
        "-c", "1", "-d", "float", "-o", "sum",
    ]  # fmt: skip
    cfg = make_cfg(
        None,
        collectives=["broadcast"],
        root=1,
        graph=True,
        graph_launches=20,
        check_iters=0,
        dtype="bf16",
        **{"backend.extra_args": ["-a", "3"]},
    )
    plan = build_plan(cfg, True)
    args = nt_args.test_args(cfg, plan, "broadcast", "bfloat16", 1, tmp_path / "x.json", True)
    assert args == [
        "-b",
        "8",
        "-e",
        "8589934592",
        "-f",
        "2",
        "-g",
        "1",
        "-n",
        "20",
        "-w",
        "5",
        "-c",
        "0",
        "-d",
        "bfloat16",
        "-r",
        "1",
        "-G",
        "20",
        "-J",
        str(tmp_path / "x.json"),
        "-a",
        "3",
    ]  # fmt: skip  (no -o: broadcast does not reduce; no -I with -G)
    cfg = make_cfg(None, sizes={"min": "1M", "max": "4M", "factor": 2, "step": "1M"})
    plan = build_plan(cfg, True)
    args = nt_args.test_args(cfg, plan, "reduce_scatter", "float", 2, per_iter=True)
    assert args[:6] == ["-b", "1048576", "-e", "4194304", "-i", "1048576"]
    assert args[-4:] == ["-o", "sum", "-I", "1"]


def test_whole_factors_only() -> None:
    cfg = make_cfg(None, sizes={"min": 8, "max": "1M", "factor": 1.5, "step": None})
    with pytest.raises(InputError, match="whole factor"):
        nt_args.test_args(cfg, build_plan(cfg, True), "all_reduce", "float", 2)


def test_launchers_lay_out_the_program(tmp_path: Path) -> None:
    """nccl-tests runs under the same launchers as gpulane's ranks: locally one process
    driving every GPU (-g N), under mpirun and Slurm one rank per GPU (-g 1)."""
    from gpulane.launch.factory import make_launcher

    assert make_launcher(make_cfg(None)).program_layout(4) == (1, 4)
    fake = _write_exe(tmp_path / "mpirun", FAKE_MPIRUN)
    mpi = make_cfg(None, launcher={"name": "mpirun", "command": str(fake)})
    assert make_launcher(mpi, "cuda", needs_mpi=True).program_layout(2) == (2, 1)
    slurm = make_cfg(None, launcher={"name": "slurm", "nodes": 2, "gpus_per_node": 4})
    assert make_launcher(slurm, "cuda", needs_mpi=True).program_layout(8) == (8, 1)
    stand_in(tmp_path / "bin", "all_reduce_perf", fixture="h200x2/nccl-tests-mpi-all_reduce.txt")
    missing = make_cfg(home=tmp_path / "bin", launcher={"name": "mpirun", "command": "no-mpirun-x"})
    with pytest.raises(MissingComponent, match="'no-mpirun-x' not found"):
        run_nccl_tests(prepare(missing), run_dir(tmp_path), {})


def test_finding_binaries(tmp_path: Path) -> None:
    home = tmp_path / "nccl-tests"
    stand_in(home / "build", "all_reduce_perf")
    other = tmp_path / "other"
    stand_in(other, "all_gather_perf")
    env = {"PATH": str(tmp_path / "bin"), "NCCL_TESTS_HOME": str(other)}
    found = nt_binaries.find_binaries(["all_reduce_perf", "all_gather_perf"], str(home), env)
    assert found == {
        "all_reduce_perf": home / "build" / "all_reduce_perf",
        "all_gather_perf": other / "all_gather_perf",
    }
    env = {"PATH": str(other)}
    assert nt_binaries.find_binaries(["all_gather_perf"], None, env) == {
        "all_gather_perf": other / "all_gather_perf"
    }
    with pytest.raises(MissingComponent) as info:
        nt_binaries.find_binaries(["all_reduce_perf", "alltoall_perf"], None, {"PATH": "/nowhere"})
    msg = str(info.value)
    assert "all_reduce_perf, alltoall_perf not found" in msg
    assert "backend.home (not set)" in msg and "NCCL_TESTS_HOME (not set)" in msg
    assert "PATH=/nowhere" in msg and "never downloads or builds" in msg
    assert "backend.home=DIR" in msg


# ---------------------------------------------------------------------------- runs


def test_run_reads_the_json_and_keeps_the_log(tmp_path: Path) -> None:
    home = tmp_path / "bin"
    stand_in(
        home,
        "all_reduce_perf",
        fixture="h200x2/nccl-tests-all_reduce.txt",
        json="h200x2/nccl-tests-all_reduce.json",
    )
    run = run_dir(tmp_path)
    env = {"NCCL_P2P_DISABLE": "1"}
    assert run_nccl_tests(prepare(make_cfg(home)), run, env) == 0
    argv = calls(home)[-1]
    assert argv[0] == str(home / "all_reduce_perf")
    assert argv[1:] == [
        "-b", "8", "-e", "8589934592", "-f", "2", "-g", "2", "-n", "20", "-w", "5", "-c", "1",
        "-d", "float", "-o", "sum", "-J", str(run.path / "nccl-tests-all_reduce-float.json"),
    ]  # fmt: skip
    rows = run.rows()
    assert len(rows) == 62 and all(r.status == "ok" for r in rows)
    first = rows[0]
    assert first.time_us == pytest.approx(19.11805)  # full precision from -J
    assert first.busbw_gbps == pytest.approx(0.000418)
    assert (first.run_id, first.build, first.source) == ("r1", "test", "measured")
    assert first.backend == "nccl-tests" and first.world_size == 2
    assert first.env["NCCL_P2P_DISABLE"] == "1"
    assert first.extra["json"] == "nccl-tests-all_reduce-float.json"
    assert first.extra["requested_bytes"] == 8 and rows[-1].extra["requested_bytes"] == (8589934592)
    assert first.versions["nccl_tests"] == "2.19.6" and first.versions["nccl"] == "2.28.3"
    log = (run.path / "nccl-tests-all_reduce-float.log").read_text()
    assert log.startswith("# gpulane: ") and "# Avg bus bandwidth    : 110.807" in log
    assert len(read_parquet(run.path / "rows.parquet")) == 62


def test_text_only_binary_and_placement_filter(tmp_path: Path) -> None:
    home = tmp_path / "bin"
    stand_in(home, "all_reduce_perf", fixture="h200x2/nccl-tests-all_reduce.txt",
             help=HELP_TEXT_ONLY)  # fmt: skip
    run = run_dir(tmp_path)
    assert run_nccl_tests(prepare(make_cfg(home, in_place="false")), run, {}) == 0
    assert "-J" not in calls(home)[-1]
    rows = run.rows()
    assert len(rows) == 31 and {r.in_place for r in rows} == {False}
    assert rows[0].time_us == 19.12 and rows[-1].time_us == 24869.3


def test_use_json_true_needs_support(tmp_path: Path) -> None:
    home = tmp_path / "bin"
    stand_in(home, "all_reduce_perf", fixture="h200x2/nccl-tests-all_reduce.txt",
             help=HELP_TEXT_ONLY)  # fmt: skip
    with pytest.raises(InputError, match="does not list -J"):
        run_nccl_tests(
            prepare(make_cfg(home, **{"backend.use_json": "true"})), run_dir(tmp_path), {}
        )


def test_nccl_failure_exit_status_keeps_earlier_rows(tmp_path: Path) -> None:
    home = tmp_path / "bin"
    stand_in(
        home,
        "all_reduce_perf",
        fixture="h200x2/nccl-tests-all_reduce.txt",
        help=HELP_TEXT_ONLY,
        cut_before="1048576",
        append="     1048576        262144     float     sum      -1vm: Test NCCL failure "
        "common.cu:408 'unhandled system error (run with NCCL_DEBUG=INFO for details) / "
        "socket timeout'\n .. vm pid 1575: Test failure common.cu:589\n",
        status=3,
    )
    run = run_dir(tmp_path)
    assert run_nccl_tests(prepare(make_cfg(home)), run, {}) == 1
    rows = run.rows()
    ok = [r for r in rows if r.status == "ok"]
    bad = [r for r in rows if r.status != "ok"]
    assert len(ok) == 2 * 17 and len(bad) == 1
    assert bad[0].size_bytes == 1048576 and bad[0].in_place is False
    assert "all_reduce_perf failed at 1048576 B out-of-place" in bad[0].error
    assert "socket timeout" in bad[0].error


def test_wrong_results_are_error_rows(tmp_path: Path) -> None:
    home = tmp_path / "bin"
    stand_in(
        home,
        "all_gather_perf",
        fixture="public/nccl-tests/wohlbier_dgx2_12xV100_all_gather_OLDFMT_FAILED.txt",
        help=HELP_TEXT_ONLY,
        status=7,
    )
    run = run_dir(tmp_path)
    cfg = make_cfg(home, collectives=["all_gather"], world_size=12)
    assert run_nccl_tests(prepare(cfg), run, {}) == 1
    bad = [r for r in run.rows() if r.status != "ok"]
    assert [(r.size_bytes, r.wrong) for r in bad] == [
        (4294967280, 1), (4294967280, 1), (8589934560, 1), (8589934560, 1)]  # fmt: skip
    assert all("out of bounds" in r.error for r in bad)


def test_binary_that_cannot_start(tmp_path: Path) -> None:
    home = tmp_path / "bin"
    stand_in(
        home,
        "all_reduce_perf",
        help=HELP_TEXT_ONLY,
        append="./all_reduce_perf: error while loading shared libraries: libnccl.so.2: "
        "cannot open shared object file: No such file or directory\n",
        status=127,
    )
    run = run_dir(tmp_path)
    assert run_nccl_tests(prepare(make_cfg(home)), run, {}) == 1
    (row,) = run.rows()
    assert row.status == "error" and row.op == "all_reduce"
    assert "exited with status 127 before printing an nccl-tests table" in row.error
    assert "libnccl.so.2: cannot open shared object file" in row.error


def test_hang_is_ended_after_timeout(tmp_path: Path) -> None:
    home = tmp_path / "bin"
    stand_in(home, "all_reduce_perf", fixture="h200x2/nccl-tests-all_reduce.txt",
             help=HELP_TEXT_ONLY, cut_before="4096", sleep=60)  # fmt: skip
    run = run_dir(tmp_path)
    assert run_nccl_tests(prepare(make_cfg(home, timeout_s=1)), run, {}) == 1
    rows = run.rows()
    assert len([r for r in rows if r.status == "ok"]) == 2 * 9
    (bad,) = [r for r in rows if r.status != "ok"]
    assert "timed out" in bad.error and "printed nothing for 1 s" in bad.error
    assert bad.extra["event"] == "timeout"


def test_killed_by_a_signal(tmp_path: Path) -> None:
    home = tmp_path / "bin"
    stand_in(home, "all_reduce_perf", fixture="h200x2/nccl-tests-all_reduce.txt",
             help=HELP_TEXT_ONLY, cut_before="4096", signal="SIGSEGV")  # fmt: skip
    run = run_dir(tmp_path)
    assert run_nccl_tests(prepare(make_cfg(home)), run, {}) == 1
    (bad,) = [r for r in run.rows() if r.status != "ok"]
    assert "was killed by SIGSEGV" in bad.error
    assert bad.size_bytes is None or bad.size_bytes == 4096


def test_under_mpirun_one_rank_per_gpu(tmp_path: Path) -> None:
    home = tmp_path / "bin"
    stand_in(home, "all_reduce_perf", fixture="h200x2/nccl-tests-mpi-all_reduce.txt",
             help=HELP_TEXT_ONLY)  # fmt: skip
    fake = _write_exe(tmp_path / "mpirun", FAKE_MPIRUN)
    cfg = make_cfg(home, launcher={"name": "mpirun", "command": str(fake)},
                   sizes={"min": 8, "max": "64M", "factor": 2, "step": None},
                   warmup=10, iters=50)  # fmt: skip
    run = run_dir(tmp_path)
    assert run_nccl_tests(prepare(cfg), run, {"NCCL_NVLS_ENABLE": "0"}) == 0
    mpirun_argv = json.loads((tmp_path / "mpirun.log").read_text().splitlines()[-1])
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    assert mpirun_argv[1 : 3 + len(root)] == ["-np", "2", *root]
    exported = [mpirun_argv[i + 1] for i, a in enumerate(mpirun_argv) if a == "-x"]
    assert "NCCL_NVLS_ENABLE" in exported and "NCCL_DEBUG_FILE" in exported
    argv = calls(home)[-1]
    assert argv[argv.index("-g") + 1] == "1"
    rows = run.rows()
    assert len(rows) == 48 and rows[0].time_us == 6.81
    assert rows[0].extra["launcher"] == "mpirun"


def test_mpirun_without_mpi_build_is_an_error(tmp_path: Path) -> None:
    """A build without MPI=1 under mpirun: every process is a test of one rank."""
    home = tmp_path / "bin"
    stand_in(home, "all_reduce_perf", fixture="h200x2/nccl-tests-mpi-all_reduce.txt",
             help=HELP_TEXT_ONLY, one_rank=True)  # fmt: skip
    fake = _write_exe(tmp_path / "mpirun", FAKE_MPIRUN)
    cfg = make_cfg(home, launcher={"name": "mpirun", "command": str(fake)})
    os.environ["FAKE_MPIRUN_PROCS"] = "2"
    try:
        assert run_nccl_tests(prepare(cfg), run_dir(tmp_path), {}) == 1
    finally:
        del os.environ["FAKE_MPIRUN_PROCS"]
    rows = RunDir("r1", tmp_path / "runs" / "r1", "test").rows()
    bad = [r for r in rows if r.status != "ok"]
    assert bad and "ran as 1 ranks but 2 were asked for" in bad[0].error
    assert "MPI=1" in bad[0].error


def test_missing_binaries_name_the_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:  # fmt: skip
    monkeypatch.delenv("NCCL_TESTS_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MissingComponent, match="all_reduce_perf not found"):
        run_nccl_tests(prepare(make_cfg(None)), run_dir(tmp_path), {})


def test_gpulane_sweep_backend_nccl_tests(tmp_path: Path) -> None:
    """The whole command: Hydra config group backend=nccl_tests, run directory, table."""
    home = tmp_path / "nccl-tests"
    stand_in(home / "build", "all_reduce_perf", fixture="h200x2/nccl-tests-all_reduce.txt",
             json="h200x2/nccl-tests-all_reduce.json")  # fmt: skip
    stand_in(home / "build", "broadcast_perf", fixture="h200x2/nccl-tests-broadcast.txt",
             help=HELP_TEXT_ONLY)  # fmt: skip
    results = tmp_path / "results"
    proc = gpulane(
        "sweep",
        "backend=nccl_tests",
        f"backend.home={home}",
        "collectives=[all_reduce,broadcast]",
        "sizes.max=8G",
        "ranks=2",
        f"results_dir={results}",
        "build=stand-in",
        "progress=false",
        cwd=tmp_path,
        env={"NCCL_TESTS_HOME": "", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (rd,) = run_dirs(results)
    rows = rows_of(rd)
    assert len(rows) == 124 and {r["op"] for r in rows} == {"all_reduce", "broadcast"}
    assert {r["build"] for r in rows} == {"stand-in"}
    assert (rd / "rows.parquet").exists() and (rd / "config.yaml").exists()
    assert "345.40" in proc.stdout and "# all_reduce (nccl-tests, 2 ranks)" in proc.stdout
    assert "# nccl-tests: " in proc.stdout and "-g 2" in proc.stdout
    shutil.rmtree(results)
