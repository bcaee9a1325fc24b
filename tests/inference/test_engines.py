"""Serving engines behind one interface: SGLang's one-batch benchmark read from its real
outputs (tests/fixtures/public/sglang, sources in tests/fixtures/public/SOURCES.md), run
through a stand-in `sglang` package of the project's own (the command line is the contract),
and `engine=auto`'s choice."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulane.config.commands import SglangConfig, TokensConfig
from gpulane.config.common import PresetConfig
from gpulane.errors import InputError, ParseError
from gpulane.inference.engines.registry import HOME, choose
from gpulane.inference.engines.sglang_bench import SglangEngine, sglang_command
from gpulane.inference.engines.sglang_import import read_sglang, rows_from_text
from gpulane.inference.vllm_import import Meta
from gpulane.record import read_rows
from tests.conftest import fixture_path
from tests.helpers import gpulane
from tests.parse_helpers import encoded_copy

ISSUE_2219 = fixture_path("public/sglang/sglang_issue2219_a30_qwen2_7b_bench_latency.txt")
RESULT_JSON = fixture_path("public/sglang/notes_qwen25_32b_tp8_bench_one_batch_result.json")
PRINTOUT = fixture_path("public/sglang/notes_qwen25_32b_tp8_bench_one_batch_printout.txt")


def test_printout_of_bench_latency_gives_prefill_and_decode_rows() -> None:
    rows = list(read_sglang(ISSUE_2219, Meta(batch=1, input_len=200, output_len=100)))
    assert [r.op for r in rows] == ["prefill", "decode", "prefill", "decode"]
    assert rows[0].time_us == pytest.approx(35080.0) and rows[0].tokens_per_s == 5700.84
    assert rows[1].time_us == pytest.approx(19240.0) and rows[1].tokens_per_s == 51.98
    assert rows[3].itl_ms_p50 == pytest.approx(18.36)
    assert {r.backend for r in rows} == {"sglang"} and {r.extra["engine"] for r in rows} == {
        "sglang"
    }
    assert {r.batch for r in rows} == {1}


def test_result_file_and_its_printout_agree() -> None:
    """The same run's JSON objects (spread over lines, back to back) and its printout,
    whose warm-up block gives no row: the same rows to the printout's digits."""
    from_json = list(read_sglang(RESULT_JSON))
    printed = list(read_sglang(PRINTOUT))
    assert [(r.op, r.batch, r.output_len) for r in from_json] == [
        ("prefill", 4, 1), ("prefill", 4, 1024), ("decode", 4, 1024),
        ("prefill", 8, 1), ("prefill", 8, 1024), ("decode", 8, 1024),
    ]  # fmt: skip
    assert len(printed) == len(from_json)
    for a, b in zip(from_json, printed, strict=True):
        assert a.op == b.op
        assert b.time_us == pytest.approx(a.time_us, abs=10.0)  # printed to 10 µs
        assert b.tokens_per_s == pytest.approx(a.tokens_per_s, abs=0.01)
    assert from_json[2].time_us == pytest.approx(18887.758, rel=1e-6)


def test_utf16_copy_reads_the_same(tmp_path: Path) -> None:
    copy = encoded_copy(tmp_path, ISSUE_2219, name="out.txt")
    assert [r.time_us for r in read_sglang(copy)] == [r.time_us for r in read_sglang(ISSUE_2219)]


def _inside_a_result(cut_text: str, json_file: bool) -> bool:
    """Whether a cut falls inside a result: an object left open, or a printed block begun
    ("Prefill." after the last "Total." line) and not ended."""
    if json_file:
        return cut_text.count("{") != cut_text.count("}")
    return cut_text.rfind("Prefill.") > cut_text.rfind("Total.") or (
        cut_text.rfind("Total.") > cut_text.rfind("\n")  # the Total line itself cut
    )


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_cut_file_keeps_the_rows_before_the_cut_and_says_so(data: st.DataObject) -> None:
    for source in (ISSUE_2219, RESULT_JSON, PRINTOUT):
        text = source.read_text()
        cut = data.draw(st.integers(1, len(text) - 2))
        whole = list(rows_from_text(text, "whole"))
        got: list[object] = []
        error = None
        try:
            for row in rows_from_text(text[:cut], "cut"):
                got.append(row)
        except ParseError as err:
            error = err
        # rows before the cut, as the whole file has them; never a number not in it
        assert [r.time_us for r in got] == [r.time_us for r in whole[: len(got)]]  # type: ignore[attr-defined]
        if _inside_a_result(text[:cut], source.suffix == ".json"):
            assert error is not None, (source.name, cut)
        elif got:
            assert error is None, (source.name, cut, error)


def test_no_result_is_one_error() -> None:
    with pytest.raises(ParseError, match="no SGLang result"):
        list(rows_from_text("Benchmark ...\nsomething else\n", "x"))
    with pytest.raises(ParseError, match="not a positive number"):
        list(rows_from_text('{"prefill_latency": "n/a"}', "x"))


def _stand_in(tmp_path: Path) -> Path:
    """A `sglang` package whose bench_one_batch writes the captured real result lines of
    the configuration it is given and prints them, as SGLang's does."""
    pkg = tmp_path / "site" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    captured = [
        '{"run_name": "x", "batch_size": 4, "input_len": 1024, "output_len": 1024, '
        '"prefill_latency": 3.58247447013855, "prefill_throughput": 1143.3438072320973, '
        '"median_decode_latency": 0.018887758255004883, '
        '"median_decode_throughput": 211.77738225975435, "total_latency": 22.969415187835693, '
        '"overall_throughput": 356.64817467091535}'
    ]
    (pkg / "bench_one_batch.py").write_text(
        textwrap.dedent(
            f"""
            import json, sys
            args = sys.argv[1:]
            out = args[args.index("--result-filename") + 1]
            with open(out + ".argv", "w") as fh:
                json.dump(args, fh)
            for line in {captured!r}:
                d = json.loads(line)
                d["batch_size"] = int(args[args.index("--batch-size") + 1])
                with open(out, "a") as fh:
                    fh.write(json.dumps(d) + "\\n")
                print("Prefill. latency: %.5f s, throughput: %9.2f token/s" % (
                    d["prefill_latency"], d["prefill_throughput"]))
            """
        )
    )
    return tmp_path / "site"


def _cfg(tmp_path: Path, **kw: object) -> TokensConfig:
    cfg = TokensConfig(
        results_dir=str(tmp_path / "runs"), build="box", batch=[1, 8], input_len=[1024],
        output_len=[1024], tp=2, dtype="bf16", preset=PresetConfig(),
        sglang=SglangConfig(model_path="/models/Qwen2.5-32B", extra_args=["--mem-fraction-static", "0.7"]),
    )  # fmt: skip
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


def test_sglang_runs_its_own_benchmark_and_its_rows_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _stand_in(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))
    said: list[str] = []
    assert SglangEngine().run(_cfg(tmp_path), said.append) == 0
    (rows_file,) = (tmp_path / "runs").glob("*/rows.jsonl")
    rows = list(read_rows(rows_file))
    assert [(r.op, r.batch) for r in rows] == [
        ("prefill", 1), ("decode", 1), ("prefill", 8), ("decode", 8),
    ]  # fmt: skip
    assert {r.backend for r in rows} == {"sglang"} and {r.tp for r in rows} == {2}
    assert {r.extra["engine"] for r in rows} == {"sglang"}
    assert rows[1].time_us == pytest.approx(18887.758, rel=1e-6)
    argv = (rows_file.parent / "sglang-b8-i1024-o1024.jsonl.argv").read_text()
    for part in ('"--tp-size", "2"', '"--batch-size", "8"', '"--load-format", "dummy"',
                 '"--dtype", "bfloat16"', '"--mem-fraction-static", "0.7"'):  # fmt: skip
        assert part in argv
    assert any("decode 211.8 tok/s" in s for s in said)


def test_command_line_of_one_configuration(tmp_path: Path) -> None:
    cmd = sglang_command(_cfg(tmp_path, graph=False), 4, 16, 512, 64, tmp_path / "r.jsonl")
    assert cmd[:3] == [sys.executable, "-m", "sglang.bench_one_batch"]
    assert "--disable-cuda-graph" in cmd and cmd[-2:] == ["--mem-fraction-static", "0.7"]


def test_auto_takes_an_installed_engine_given_its_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _cfg(tmp_path, engine="auto")
    assert choose(cfg, "cpu").engine == HOME  # serving engines need GPUs
    no_engine = choose(cfg, "cuda")
    if no_engine.engine == HOME:  # neither vllm nor sglang is installed here
        assert "sglang not installed" in no_engine.why
    monkeypatch.syspath_prepend(str(_stand_in(tmp_path)))
    picked = choose(cfg, "cuda")
    assert picked.engine in ("vllm", "sglang") and "own benchmark" in picked.why
    cfg.sglang.model_path = None
    cfg.vllm.model_path = None
    home = choose(cfg, "cuda")
    assert home.engine == HOME and "no sglang.model_path given" in home.why


def test_an_engine_asked_for_and_missing_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="engine=sglang: sglang is not installed; pip install"):
        choose(_cfg(tmp_path, engine="sglang"), "cuda")


def test_tokens_on_cpu_with_auto_runs_gpulane_and_says_why(tmp_path: Path) -> None:
    out = gpulane(
        "tokens", "model=tiny", "batch=1", "input_len=16", "output_len=4", "iters=1",
        "warmup=0", "comm_off=false", f"results_dir={tmp_path}", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "# engine=auto: gpulane's decoder (serving engines need GPUs)" in out.stdout
