"""Model shapes: what a decoder's weights and KV cache look like, from a config or config.json.

Only shapes matter here: weights are random, so a model is its hidden size, heads, KV
heads, head dimension, MLP width, layers, vocabulary and (for mixture-of-experts models)
its experts and top-k.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.errors import InputError

DTYPE_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "half": 2, "float16": 2, "fp32": 4, "float": 4}
DTYPE_NAMES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "half", "half": "half"}
DTYPE_NAMES.update({"float16": "half", "fp32": "float", "float": "float"})


@dataclass(frozen=True)
class ModelShape:
    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rope_theta: float = 10000.0
    tie_embeddings: bool = False
    qkv_bias: bool = False
    # mixture of experts (0 experts: a dense model)
    num_experts: int = 0
    top_k: int = 0
    moe_intermediate_size: int = 0
    shared_experts: int = 0
    first_dense_layers: int = 0
    scoring: str = "softmax"  # softmax (Mixtral) or sigmoid (GLM, DeepSeek)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def is_moe_layer(self, layer: int) -> bool:
        return self.is_moe and layer >= self.first_dense_layers

    def with_layers(self, layers: int | None) -> ModelShape:
        if layers is None or layers == self.num_layers:
            return self
        return dataclasses.replace(self, num_layers=int(layers))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def check(self) -> ModelShape:
        where = f"model {self.name}"
        for key in (
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
        ):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{where}: {key} must be a whole number >= 1, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise InputError(
                f"{where}: num_heads ({self.num_heads}) is not a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.head_dim % 2:
            raise InputError(f"{where}: head_dim ({self.head_dim}) must be even for rotary")
        if self.is_moe:
            if not 1 <= self.top_k <= self.num_experts:
                raise InputError(
                    f"{where}: top_k ({self.top_k}) must be between 1 and num_experts "
                    f"({self.num_experts})"
                )
            if self.moe_intermediate_size < 1:
                raise InputError(f"{where}: moe_intermediate_size must be >= 1 for experts")
        if self.scoring not in ("softmax", "sigmoid"):
            raise InputError(f"{where}: scoring must be softmax or sigmoid, got {self.scoring!r}")
        return self


_FIELDS = {f.name for f in dataclasses.fields(ModelShape)}


def _first(data: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if data.get(key) is not None:
            return data[key]
    return None


def shape_from_hf(data: Mapping[str, Any], name: str | None = None) -> ModelShape:
    """A :class:`ModelShape` from the contents of a Hugging Face ``config.json``."""
    if isinstance(data.get("text_config"), Mapping):  # multimodal wrappers
        data = {**data["text_config"], **{k: v for k, v in data.items() if k != "text_config"}}
    missing = [
        k
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
        if data.get(k) is None
    ]
    if missing:
        raise InputError(
            f"config.json has no {', '.join(missing)}; is it a decoder language model's config?"
        )
    hidden = int(data["hidden_size"])
    heads = int(data["num_attention_heads"])
    experts = int(_first(data, "num_local_experts", "n_routed_experts", "num_experts") or 0)
    model_type = str(data.get("model_type") or "")
    inter = _first(data, "intermediate_size", "ffn_hidden_size")
    moe_inter = _first(data, "moe_intermediate_size") or (inter if experts else 0)
    shared = _first(data, "n_shared_experts", "num_shared_experts") or 0
    if not shared and data.get("shared_expert_intermediate_size") and moe_inter:
        shared = max(1, int(data["shared_expert_intermediate_size"]) // int(moe_inter))
    scoring = str(
        data.get("scoring_func") or ("sigmoid" if "glm4_moe" in model_type else "softmax")
    )
    bias = data.get("attention_bias")
    if bias is None:
        bias = model_type.startswith("qwen2")
    return ModelShape(
        name=name or str(data.get("_name_or_path") or model_type or "hf-model"),
        hidden_size=hidden,
        num_layers=int(data["num_hidden_layers"]),
        num_heads=heads,
        num_kv_heads=int(_first(data, "num_key_value_heads") or heads),
        head_dim=int(_first(data, "head_dim") or hidden // heads),
        intermediate_size=int(inter or 4 * hidden),
        vocab_size=int(data["vocab_size"]),
        rope_theta=float(_first(data, "rope_theta") or 10000.0),
        tie_embeddings=bool(data.get("tie_word_embeddings", False)),
        qkv_bias=bool(bias),
        num_experts=experts,
        top_k=int(_first(data, "num_experts_per_tok", "moe_topk") or 0) if experts else 0,
        moe_intermediate_size=int(moe_inter or 0),
        shared_experts=int(shared),
        first_dense_layers=int(data.get("first_k_dense_replace") or 0) if experts else 0,
        scoring=scoring if scoring in ("softmax", "sigmoid") else "softmax",
    ).check()


def load_hf_config(path: str | Path, name: str | None = None) -> ModelShape:
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"model.hf_config: cannot read {p}: {err.strerror or err}") from err
    except json.JSONDecodeError as err:
        raise InputError(
            f"model.hf_config: {p} is not JSON ({err.msg}, line {err.lineno})"
        ) from err
    if not isinstance(data, dict):
        raise InputError(f"model.hf_config: {p} does not hold a JSON object")
    try:
        return shape_from_hf(data, name or p.parent.name)
    except InputError as err:
        raise InputError(f"model.hf_config {p}: {err}") from err


def shape_from_config(model: Mapping[str, Any]) -> ModelShape:
    """The shape a ``model`` config group selects: its keys, over its ``hf_config`` if any."""
    values = {k: v for k, v in dict(model).items() if v is not None}
    base: dict[str, Any] = {}
    if values.get("hf_config"):
        base = load_hf_config(str(values["hf_config"]), values.get("name")).to_dict()
    unknown = sorted(set(values) - _FIELDS - {"hf_config"})
    if unknown:
        raise InputError(f"model: unknown keys {unknown}; known: {sorted(_FIELDS)}")
    merged = {**base, **{k: v for k, v in values.items() if k in _FIELDS}}
    merged.setdefault("name", "model")
    required = (
        "hidden_size",
        "num_layers",
        "num_heads",
        "vocab_size",
        "intermediate_size",
    )
    missing = [k for k in required if k not in merged]
    if missing:
        raise InputError(
            f"model {merged['name']}: missing {', '.join(missing)}; "
            "write them in the model config or point model.hf_config at a config.json"
        )
    merged.setdefault("num_kv_heads", merged["num_heads"])
    merged.setdefault("head_dim", int(merged["hidden_size"]) // int(merged["num_heads"]))
    if merged.get("num_experts") and not merged.get("moe_intermediate_size"):
        merged["moe_intermediate_size"] = merged["intermediate_size"]
    try:
        return ModelShape(**merged).check()
    except TypeError as err:
        raise InputError(f"model {merged['name']}: {err}") from err


def packaged_shape(name: str) -> ModelShape | None:
    """The shape of a model config that ships with gpulane (gpulane/conf/model/NAME.yaml),
    or None (an hf model, a name of the user's own)."""
    import yaml

    path = Path(__file__).resolve().parents[1] / "conf" / "model" / f"{name}.yaml"
    if not path.is_file() or "/" in name:
        return None
    try:
        return shape_from_config(yaml.safe_load(path.read_text(encoding="utf-8")))
    except InputError:
        return None


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[str(dtype).lower()]
    except KeyError:
        raise InputError(f"dtype: expected bf16, fp16 or fp32, got {dtype!r}") from None
