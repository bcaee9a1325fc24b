"""`gpulane COMMAND --help` teaches: every key a user sets has one line of meaning (its
dataclass field's docstring), internal and self-test keys are hidden, and help is printed
without Hydra or torch (timed in benchmarks/cli)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from gpulane.cli import main
from gpulane.commands.help import key_rows, render
from gpulane.config.backend import BACKENDS
from gpulane.config.commands import COMMANDS
from gpulane.config.docs import closest_key, field_docs, hidden, visible_fields
from gpulane.config.launcher import LAUNCHERS

SCHEMAS = [*COMMANDS.values(), *BACKENDS.values(), *LAUNCHERS.values()]
HIDDEN = ["corrupt_rank", "skip_rank", "world_size", "auto_schema", "preset_schema"]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.__name__)
def test_every_key_has_one_line_of_meaning(schema: type) -> None:
    docs = field_docs(schema)
    for f in dataclasses.fields(schema):
        assert docs.get(f.name), f"{schema.__name__}.{f.name} has no docstring"
        assert "\n" not in docs[f.name]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_lists_every_visible_key_with_its_meaning(command: str) -> None:
    text = render(command)
    schema = COMMANDS[command]
    for key, _default, meaning in key_rows(schema):
        assert key in text
        assert meaning and meaning in text
    listed = {ln.split()[0].split("=")[0] for ln in text.splitlines() if ln.startswith("  ")}
    for word in HIDDEN:
        assert word not in listed and f"{word}," not in text, word
    assert "$CONFIG" not in text and "$APP_CONFIG_GROUPS" not in text


def test_hidden_keys_are_marked_in_the_schema() -> None:
    sweep = COMMANDS["sweep"]
    assert hidden(sweep, "corrupt_rank") and hidden(sweep, "skip_rank")
    # run_id=NAME is the user's to set (issue 44.12): sweep --help lists it
    assert not hidden(sweep, "run_id") and "run_id" in render("sweep")
    assert "collectives" in visible_fields(sweep) and "skip_rank" not in visible_fields(sweep)


def test_sweep_help_shows_groups_keys_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--help"]) == 0
    out = capsys.readouterr().out
    assert "backend=OPTION  (default: auto)" in out
    assert "launcher.tasks_per_node" in out and "(slurm)" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("sizes.max"))
    assert "auto" in line and "Largest message" in line
    assert "pcie-host" in out and "through host memory" in out


def test_tokens_help_offers_model_files_not_config_dir(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tokens", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--config-dir" not in out
    assert "model=PATH.yaml" in out and "config.json" in out
    assert "tiny" in out and "A tiny dense model" in out


def test_help_loads_neither_hydra_nor_torch() -> None:
    code = (
        "import sys; from gpulane.cli import main; rc = main(['sweep', '--help']);"
        "heavy = [m for m in ('hydra', 'torch', 'omegaconf', 'pandas') if m in sys.modules];"
        "print('LOADED', heavy); sys.exit(rc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "LOADED []" in out.stdout, out.stdout[-300:]


@pytest.mark.parametrize(
    ("typed", "keys", "meant"),
    [
        ("foo", ["root", "ranks", "sizes"], None),  # nothing close: no guess
        ("nrank", ["root", "ranks", "sizes"], "ranks"),
        ("message_size", ["root", "ranks", "sizes"], "sizes"),  # by meaning
        ("algo", ["build", "env", "iters"], "env"),  # +env.NCCL_ALGO in env's meaning
    ],
)
def test_closest_key_by_spelling_or_meaning(typed: str, keys: list[str], meant: str | None) -> None:
    assert closest_key(typed, keys) == meant
