"""Model shapes: the shipped configs, config.json loading, and checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gpulane.errors import InputError
from gpulane.inference.shapes import load_hf_config, shape_from_config, shape_from_hf
from gpulane.inference.sharding import max_rank_params

CONF = Path(__file__).resolve().parents[2] / "gpulane" / "conf" / "model"


def shipped(name: str):
    return shape_from_config(OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml")))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("llama3-8b", 8.03),
        ("llama3-70b", 70.55),
        ("qwen2.5-72b", 72.7),
        ("mixtral-8x7b", 46.7),
        ("glm-4.5-air", 106.0),  # 110B with its MTP layer, which is not run
    ],
)
def test_shipped_models_have_their_published_parameter_counts(name: str, billions: float) -> None:
    shape = shipped(name)
    assert shape.name == name
    assert max_rank_params(shape, 1, 1) / 1e9 == pytest.approx(billions, rel=0.02)


def test_llama_8b_shapes() -> None:
    s = shipped("llama3-8b")
    assert (s.hidden_size, s.num_layers, s.num_heads, s.num_kv_heads, s.head_dim) == (
        4096,
        32,
        32,
        8,
        128,
    )
    assert (s.intermediate_size, s.vocab_size, s.is_moe) == (14336, 128256, False)


def test_moe_shapes() -> None:
    m = shipped("mixtral-8x7b")
    assert (m.num_experts, m.top_k, m.moe_intermediate_size) == (8, 2, 14336)
    g = shipped("glm-4.5-air")
    assert (g.num_experts, g.top_k, g.shared_experts, g.first_dense_layers) == (128, 8, 1, 1)
    assert not g.is_moe_layer(0) and g.is_moe_layer(1)
    assert g.scoring == "sigmoid"


def test_hf_config_json(tmp_path: Path) -> None:
    cfg = {
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 32000,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "rope_theta": 1e6,
    }
    d = tmp_path / "Mixtral-8x7B"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    s = load_hf_config(d)
    assert s.name == "Mixtral-8x7B" and s.head_dim == 128
    assert s.to_dict() | {"name": "mixtral-8x7b"} == shipped("mixtral-8x7b").to_dict()
    # through the model config group, with a key overridden
    over = shape_from_config({"name": None, "hf_config": str(d / "config.json"), "num_layers": 4})
    assert over.num_layers == 4 and over.num_experts == 8


def test_hf_qwen_and_glm_conventions() -> None:
    qwen = shape_from_hf(
        {
            "model_type": "qwen2",
            "hidden_size": 8192,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "intermediate_size": 29568,
            "vocab_size": 152064,
        }
    )
    assert qwen.qkv_bias and qwen.head_dim == 128
    glm = shape_from_hf(
        {
            "model_type": "glm4_moe",
            "hidden_size": 4096,
            "num_hidden_layers": 46,
            "num_attention_heads": 96,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "intermediate_size": 10944,
            "moe_intermediate_size": 1408,
            "n_routed_experts": 128,
            "n_shared_experts": 1,
            "num_experts_per_tok": 8,
            "first_k_dense_replace": 1,
            "attention_bias": True,
            "vocab_size": 151552,
        }
    )
    assert (
        glm.to_dict() | {"name": "glm-4.5-air", "rope_theta": 1e6}
        == shipped("glm-4.5-air").to_dict()
    )


def test_bad_configs_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="num_hidden_layers"):
        shape_from_hf({"hidden_size": 8, "num_attention_heads": 2, "vocab_size": 4})
    with pytest.raises(InputError, match="cannot read"):
        load_hf_config(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(InputError, match="not JSON"):
        load_hf_config(tmp_path / "bad.json")
    with pytest.raises(InputError, match="unknown keys"):
        shape_from_config({"name": "x", "hidden": 3})
    with pytest.raises(InputError, match="not a multiple"):
        shape_from_config(
            {
                "name": "x",
                "hidden_size": 64,
                "num_layers": 1,
                "num_heads": 6,
                "num_kv_heads": 4,
                "vocab_size": 10,
                "intermediate_size": 8,
            }
        )
