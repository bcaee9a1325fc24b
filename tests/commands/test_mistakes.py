"""The one table of mistakes a new user makes, each answered with the fix a person would
give: one `gpulane: error:` line, the suggestion in it, exit 2, no traceback. Each case is
the real command (in process: the CLI's own main) on real files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpulane.cli import main
from tests.helpers import fixture_path

NCCL_TESTS_LOG = fixture_path("public/nccl-tests/autodl_2x2080ti_all_gather_pcie.txt")
BANDWIDTH_TEST = fixture_path("public/bandwidthtest/autodl_2080ti_bandwidthTest.txt")
P2P_LOG = fixture_path(
    "public/bandwidthtest/stelline_asus_4xRTX6000Ada_p2pBandwidthLatencyTest.txt"
)
VLLM_LOG = fixture_path("public/vllm/vllm_readme_benchmark_throughput_sonnet.txt")
RUN = fixture_path("h200x2/doctor/runs/20261123-053149-pcie-host-e607")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    binary = tmp_path / "trace.bin"
    binary.write_bytes(b"\x00\x01\xff\xfe\x80binary\x00" * 64)
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    return {
        "BIN": str(binary),
        "RUN": str(run),
        "NCCL": str(NCCL_TESTS_LOG),
        "BWT": str(BANDWIDTH_TEST),
        "P2P": str(P2P_LOG),
        "VLLM": str(VLLM_LOG),
    }


# (argv with {FILE} placeholders, what the one error line must say, what it must not)
MISTAKES = [
    # an unknown key with nothing close: the keys there are, never a random neighbour
    (["sweep", "foo=1"], ["unknown key 'foo'", "keys: build", "collectives", "sizes"], ["root'"]),
    # spelling and meaning
    (["sweep", "size=1M"], ["did you mean 'sizes'"], []),
    (["sweep", "nranks=4"], ["did you mean 'ranks'"], []),
    (["sweep", "iter=3"], ["did you mean 'iters'"], []),
    (["sweep", "sizes.maxx=1M"], ["did you mean 'sizes.max'"], []),
    # Hydra overrides take no dashes
    (
        ["sweep", "--sizes.max=1M"],
        ["Hydra overrides have no leading dashes", "write sizes.max=1M"],
        ["LexerNoViableAlt"],
    ),
    (["sweep", "--verbose"], ["not an option of gpulane sweep", "KEY=VALUE"], []),
    # a list is one argument
    (
        ["sweep", "collectives=all_reduce", "all_gather"],
        ["joined by a comma", "collectives=all_reduce,all_gather"],
        [],
    ),
    # a new key of a map needs +
    (["sweep", "env.NCCL_ALGO=Ring"], ["add +", "+env.NCCL_ALGO=Ring"], []),
    (
        ["sweep", "launcher=slurm", "launcher.sbatch_args.reservation=x"],
        ["+launcher.sbatch_args.reservation=x"],
        [],
    ),
    # Hydra's config-directory flags are not offered; a model file is
    (["tokens", "--config-dir", "/tmp", "model=x"], ["model=PATH.yaml"], ["LexerNoViableAlt"]),
    (["sweep", "-m", "collectives=all_reduce,all_gather", "--cfg", "job"], ["one of them"], []),
    # topo: MODE=FILE with a mode that is none
    (
        ["topo", "--p2p-file", "x=FILE"],
        ["'x' is not a topo -p2p mode", "r (read)", "--p2p-file FILE"],
        ["cannot read"],
    ),
    # parse: the format's name, and the format a file looks like
    (["parse", "nccltests", "{NCCL}"], ["did you mean nccl-tests?"], []),
    (["parse", "NCCL_Tests", "{NCCL}"], ["did you mean nccl-tests?"], []),
    (["parse", "{NCCL}"], ["the format comes first: gpulane parse nccl-tests"], []),
    (
        ["parse", "bandwidthtest", "{NCCL}"],
        ["this file looks like nccl-tests output: `gpulane parse nccl-tests "],
        [],
    ),
    (["parse", "nccl-tests", "{VLLM}"], ["looks like vllm output: `gpulane parse vllm "], []),
    (["parse", "bandwidthtest", "{P2P}"], ["looks like p2p output: `gpulane parse p2p "], []),
    (["parse", "p2p", "{BWT}"], ["looks like bandwidthtest output"], []),
    # results: the column meant
    (
        ["results", "{RUN}", "--where", "busbw > 100"],
        ["no column busbw", "did you mean busbw_gbps?", "--where 'busbw_gbps > 100'"],
        [],
    ),
    # trace: one line, never the file's bytes
    (["trace", "{BIN}"], ["a binary file, not a trace", "(.json, .json.gz)"], ["\\x00", "\x00"]),
    # accept checks rows: a log is parsed first, and the expectation is a count
    (
        ["accept", "run={NCCL}"],
        ["is an nccl-tests log, not rows", "gpulane parse nccl-tests {NCCL} --out"],
        ["Traceback"],
    ),
    (["accept", "gpus=0", "run={RUN}"], ["gpus: 0", "(1+)"], []),
    (["accept", "device=gpu", "run={RUN}"], ["device: expected auto, cuda or cpu, got 'gpu'"], []),
    # filters that match nothing say why, with the value meant (issue 44.8)
    (["results", "{RUN}", "--kind", "collectives"], ["--kind collectives", "did you mean collective?"], []),
    (["results", "{RUN}", "--build", "PCIE-HOST"], ["--build PCIE-HOST", "did you mean pcie-host?"], []),
    (["results", "{RUN}", "--op", "all_redcue"], ["--op all_redcue", "did you mean all_reduce?"], []),
    (["results", "{RUN}", "--sql", "select * from rows", "--where", "size_bytes > 0"],
     ["--sql with --where", "where clause"], []),
    (["compare", "{RUN}", "{RUN}", "--op", "all_redcue"], ["--op all_redcue", "did you mean all_reduce?"],
     ["the metrics asked for"]),
    (["history", "{RUN}", "--build", "pcie"], ["--build pcie", "pcie-host"], []),
    # issue 44.6 and 44.12: every -m value checked before the first run; bits are no size;
    # NCCL_* env on gloo refused as presets are
    (["sweep", "-m", "device=cpu", "dtype=float,flaot"], ["'flaot'", "did you mean 'float'?", "choose one of"], []),
    (["sweep", "-m", "device=cpu", "collectives=all_reduce,all_redcue"],
     ["'all_redcue'", "did you mean 'all_reduce'?", "choose from"], []),
    (["sweep", "device=cpu", "sizes.max=1Gb"], ["sizes.max", "bits", "'1G' or '1GiB'"], []),
    (["sweep", "device=cpu", "+env.NCCL_ALGO=Ring"], ["env.NCCL_ALGO", "gloo"], []),
    # issue 46: P2P state is a projection's input; measured rows carry their own
    (["advise", "model=llama3-8b", "gpus=2", "gpu=L4", "p2p=off", "run={NCCL}"],
     ["p2p=off: only with what_if=pcie:GENxWIDTH", "preset=pcie-host"], []),
    (["advise", "model=llama3-8b", "gpus=2", "gpu=L4", "what_if=pcie:4x16", "p2p=maybe"],
     ["p2p: expected on or off, got 'maybe'"], []),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "says", "never"), MISTAKES, ids=lambda v: None)
def test_mistake_answered_with_the_fix(
    argv: list[str],
    says: list[str],
    never: list[str],
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main([a.format(**files) for a in argv])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("gpulane: error:")]
    assert code == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for text in says:
        assert text.format(**files) in lines[0], lines[0]
    for text in never:
        assert text not in lines[0], lines[0]


def test_an_op_alias_sweep_accepts_is_accepted_by_results(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # `sweep collectives=allreduce` runs all_reduce: `results --op allreduce` finds it
    assert main(["results", files["RUN"], "--op", "allreduce", "--format", "csv"]) == 0
    alias = capsys.readouterr().out
    assert main(["results", files["RUN"], "--op", "all_reduce", "--format", "csv"]) == 0
    assert alias == capsys.readouterr().out and alias.count("\n") > 1
