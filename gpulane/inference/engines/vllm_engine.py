"""vLLM behind the serving-engine interface: its `vllm bench` commands
(:mod:`gpulane.inference.vllm_bench`) and its result files
(:mod:`gpulane.inference.vllm_import`)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from gpulane.config.commands import TokensConfig
from gpulane.inference.engines.base import installed_version
from gpulane.inference.vllm_bench import run_vllm
from gpulane.inference.vllm_import import Meta, read_vllm
from gpulane.record import Row


class VllmEngine:
    name = "vllm"
    install_hint = "pip install vllm (or engine=gpulane for gpulane's own decoder)"

    def installed(self) -> str | None:
        found = installed_version("vllm")
        if found is None:
            return "on PATH" if shutil.which("vllm") else None
        return found

    def model_path(self, cfg: TokensConfig) -> str | None:
        return str(cfg.vllm.model_path) if cfg.vllm.model_path else None

    def run(self, cfg: TokensConfig, say: Callable[[str], None]) -> int:
        return run_vllm(cfg, say)

    def rows(self, path: Path, meta: Meta) -> Iterator[Row]:
        return read_vllm(path, meta)
