"""The shipped rule sets, composed as `gpulane accept` composes them."""

from __future__ import annotations

import copy
import functools
from typing import Any

from hydra import compose, initialize_config_module
from omegaconf import OmegaConf


def rule_set(name: str = "default", *overrides: str) -> dict[str, Any]:
    return copy.deepcopy(_rule_set(name, *overrides))


@functools.cache
def _rule_set(name: str, *overrides: str) -> dict[str, Any]:
    with initialize_config_module("gpulane.conf", version_base="1.3"):
        cfg = compose("accept", overrides=[f"rules={name}", *overrides])
    spec = OmegaConf.to_container(cfg.rules, resolve=True)
    assert isinstance(spec, dict)
    return {str(k): v for k, v in spec.items()}
