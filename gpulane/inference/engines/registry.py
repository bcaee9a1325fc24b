"""The serving engines gpulane drives, and how `engine=auto` chooses among them and its
own decoder.

``engine=auto``: an installed serving engine (vLLM, then SGLang) with a model directory
given to it makes the token figures, since its step time on this build is the truth and the
home decoder's an estimate; gpulane's own decoder runs where no engine or no model is given,
on CPUs, and for the compute-only step (``comm_off``) that only it can give.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulane.config.commands import TokensConfig
from gpulane.errors import InputError
from gpulane.inference.engines.base import ServingEngine
from gpulane.inference.engines.sglang_bench import SglangEngine
from gpulane.inference.engines.vllm_engine import VllmEngine

HOME = "gpulane"
ENGINES: dict[str, ServingEngine] = {e.name: e for e in (VllmEngine(), SglangEngine())}


@dataclass(frozen=True)
class Choice:
    engine: str  # "gpulane" or a key of ENGINES
    why: str  # one line for the run's header


def choose(cfg: TokensConfig, device: str) -> Choice:
    """Which engine runs: the one asked for (a missing serving engine: InputError naming
    what to install), or for ``auto`` as the module says."""
    asked = str(cfg.engine or "auto")
    if asked == HOME:
        return Choice(HOME, "engine=gpulane: gpulane's decoder (random weights)")
    if asked in ENGINES:
        engine = ENGINES[asked]
        if engine.installed() is None:
            raise InputError(f"engine={asked}: {asked} is not installed; {engine.install_hint}")
        if engine.model_path(cfg) is None:
            raise InputError(
                f"engine={asked}: give the model directory {asked}.model_path=/path/to/model "
                "(its config.json and tokenizer; weights are random with load_format=dummy)"
            )
        return Choice(asked, f"engine={asked}: {asked} {engine.installed()}'s own benchmark")
    if asked != "auto":
        names = ", ".join(["auto", HOME, *ENGINES])
        raise InputError(f"engine: expected one of {names}, got {asked!r}")
    return _auto(cfg, device)


def _auto(cfg: TokensConfig, device: str) -> Choice:
    if device != "cuda":
        return Choice(HOME, "engine=auto: gpulane's decoder (serving engines need GPUs)")
    missing = []
    for name, engine in ENGINES.items():
        version = engine.installed()
        if version is None:
            missing.append(f"{name} not installed")
        elif engine.model_path(cfg) is None:
            missing.append(f"{name} {version} installed, no {name}.model_path given")
        else:
            return Choice(
                name, f"engine=auto: {name} {version}'s own benchmark on {engine.model_path(cfg)}"
            )
    return Choice(HOME, "engine=auto: gpulane's decoder (" + "; ".join(missing) + ")")
