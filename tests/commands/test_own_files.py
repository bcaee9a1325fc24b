"""A user's own model file: model=PATH.yaml (the shape keys) or model=PATH/config.json,
read and checked before Hydra composes, with one-line errors naming the file; the shape
the command then gets is the file's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulane.cli import main
from gpulane.commands.hydra_app import compose_typed
from gpulane.commands.own_files import model_overrides
from gpulane.inference.shapes import ModelShape, shape_from_config
from tests.helpers import fixture_path

MINE = """\
# my model: 2 layers of a small dense decoder
hidden_size: 64
num_layers: 2
num_heads: 4
num_kv_heads: 2
intermediate_size: 128
vocab_size: 250
qkv_bias: true
"""


def _shape(argv: list[str], command: str = "tokens") -> ModelShape:
    cfg = compose_typed(command, model_overrides(argv))
    return shape_from_config(dict(cfg.model))


@pytest.mark.parametrize("command", ["tokens", "advise"])
def test_yaml_model_file_is_the_shape(tmp_path: Path, command: str) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(MINE)
    shape = _shape([f"model={path}"], command)
    assert shape.name == "mine"  # the file's name, unless the file says one
    assert (shape.hidden_size, shape.num_layers, shape.num_kv_heads) == (64, 2, 2)
    assert shape.qkv_bias is True
    assert shape.head_dim == 16


def test_hf_config_json_and_its_directory(tmp_path: Path) -> None:
    data = {
        "hidden_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "intermediate_size": 256,
        "vocab_size": 1000,
    }
    model_dir = tmp_path / "My-Model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(data))
    for given in (model_dir / "config.json", model_dir):
        shape = _shape([f"model={given}"])
        assert (shape.hidden_size, shape.num_layers, shape.num_kv_heads) == (128, 3, 4)


def test_a_packaged_name_is_left_alone() -> None:
    assert model_overrides(["model=tiny", "tp=1"]) == ["model=tiny", "tp=1"]


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("typo.yaml", MINE.replace("num_layers", "num_layer"), "did you mean num_layers?"),
        ("list.yaml", "- a\n- b\n", "expected the model's shape keys"),
        ("broken.yaml", "hidden_size: [64\n", "not YAML at line"),
        ("short.yaml", "hidden_size: 64\n", "missing num_layers"),
        ("odd.yaml", MINE.replace("head", "head") + "head_dim: 15\n", "head_dim (15) must be even"),
        ("nosuch.yaml", None, "no such file"),
        ("model.txt", "x", "expected a .yaml model file or a config.json"),
        ("bad.json", "{not json", "is not JSON"),
    ],
)
def test_bad_model_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str | None, says: str
) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    assert main(["tokens", f"model={path}"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("gpulane: error:")]
    assert len(lines) == 1 and says in lines[0] and f"model={path}" in lines[0], err


def test_packaged_model_files_are_valid_user_files(tmp_path: Path) -> None:
    """What the docs tell a user to copy (gpulane/conf/model/tiny.yaml) works as a file."""
    src = fixture_path("../../gpulane/conf/model/tiny.yaml")
    copy = tmp_path / "copied.yaml"
    copy.write_text(src.read_text())
    assert _shape([f"model={copy}"]).name == "tiny"


def test_yaml_over_a_config_json_beside_it(tmp_path: Path) -> None:
    """docs/models.md: hf_config relative to the YAML file, the YAML's keys over it."""
    (tmp_path / "cfg.json").write_text(
        json.dumps(
            {
                "hidden_size": 128,
                "num_hidden_layers": 30,
                "num_attention_heads": 8,
                "intermediate_size": 256,
                "vocab_size": 1000,
            }
        )
    )
    (tmp_path / "short.yaml").write_text("hf_config: cfg.json\nnum_layers: 2\n")
    shape = _shape([f"model={tmp_path / 'short.yaml'}"])
    assert (shape.name, shape.hidden_size, shape.num_layers) == ("short", 128, 2)


def test_unknown_packaged_name_offers_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tokens", "model=nosuch"]) == 2
    err = capsys.readouterr().err
    assert "choose one of glm-4.5-air" in err and "model=PATH.yaml" in err
