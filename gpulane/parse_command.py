"""`gpulane parse FORMAT FILE...`: other tools' printouts as gpulane result rows."""

from __future__ import annotations

import importlib

from gpulane.errors import InputError

# format -> (module:function taking argv and returning an exit status, help)
FORMATS: dict[str, tuple[str, str]] = {
    "nccl-tests": ("gpulane.collectives.nccl_tests.importer:main", "nccl-tests text or -J JSON"),
    "bandwidthtest": ("gpulane.transfers.importers:main_bandwidthtest", "CUDA bandwidthTest"),
    "p2p": ("gpulane.transfers.importers:main_p2p", "p2pBandwidthLatencyTest"),
    "nvbandwidth": ("gpulane.transfers.importers:main_nvbandwidth", "nvbandwidth"),
    "vllm": ("gpulane.inference.vllm_import:main", "vLLM bench / benchmark_serving output"),
}


def usage() -> str:
    lines = ["usage: gpulane parse FORMAT FILE... [--json] [--out DIR]", "", "formats:"]
    lines += [f"  {name:<14} {text}" for name, (_, text) in FORMATS.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in FORMATS:
        raise InputError(f"parse: unknown format {name!r}; formats: {', '.join(FORMATS)}")
    module, func = FORMATS[name][0].split(":")
    return int(getattr(importlib.import_module(module), func)(rest) or 0)
