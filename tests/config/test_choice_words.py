"""Closed word sets of the commands' configs (config/choices): a word outside the set is one
`gpulane: error:` line naming the key and the words it takes, exit 2, before anything
runs, through the real CLI and Hydra."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpulane.config.choices import choices
from gpulane.config.commands import AcceptConfig, AdviseConfig, SweepConfig, TokensConfig
from tests.helpers import gpulane

# an accept that measures nothing: it checks rows already there (run=), so a run that got
# past the word check would fail on the missing directory instead
ACCEPT = ["accept", "run=no-such-run"]
ADVISE = ["advise", "model=llama3-8b"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*ACCEPT, "format=xml"], "format: expected table, markdown, json or none, got 'xml'"),
        ([*ACCEPT, "device=gpu"], "device: expected auto, cuda or cpu, got 'gpu'"),
        ([*ADVISE, "format=yaml"], "format: expected table or json, got 'yaml'"),
        ([*ADVISE, "p2p=maybe"], "p2p: expected on or off, got 'maybe'"),
        (["tokens", "device=tpu"], "device: expected auto, cuda or cpu, got 'tpu'"),
    ],
)
def test_a_word_outside_the_set_is_one_error_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = gpulane(*args, f"results_dir={tmp_path}", cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert lines == [f"gpulane: error: {message}"], out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert not any(tmp_path.iterdir()), "nothing may be written before the input is checked"


@pytest.mark.parametrize(
    ("schema", "key", "words"),
    [
        (SweepConfig, "device", ("auto", "cuda", "cpu")),
        (TokensConfig, "device", ("auto", "cuda", "cpu")),
        (AcceptConfig, "device", ("auto", "cuda", "cpu")),
        (AcceptConfig, "format", ("table", "markdown", "json", "none")),
        (AdviseConfig, "format", ("table", "json")),
        (AdviseConfig, "p2p", ("on", "off")),
    ],
)
def test_each_default_is_one_of_its_words(schema: type, key: str, words: tuple[str, ...]) -> None:
    assert choices(schema)[key] == words
    default = {f.name: f.default for f in dataclasses.fields(schema)}[key]
    assert default in words
