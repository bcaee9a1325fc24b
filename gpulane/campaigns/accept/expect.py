"""How many GPUs the node should have, and what accept says when it sees fewer (or none).

The expectation comes from ``accept gpus=N`` or from the rule set's ``expect:`` block
(``expect: {gpus: 8}``); ``gpus=`` wins. With an expectation, fewer GPUs visible (or more)
is a FAIL naming the likely cause: CUDA_VISIBLE_DEVICES, no driver loaded, an NVML error.
Without one, a node where no GPU is visible is INCOMPLETE (exit 3): a suite that measured
only CPUs says nothing about the GPUs the node was bought for. ``device=cpu`` accepts a
CPU node knowingly (the suite then measures CPU processes, as the tests do). Stored rows
(``accept run=``) measured on CPU processes only are INCOMPLETE the same way, unless
``device=cpu`` says they are meant.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpulane.analysis.compare.machines import CPU, machine_frame
from gpulane.analysis.rules import FAIL, PASS, Check
from gpulane.analysis.rules.model import Missing
from gpulane.errors import InputError
from gpulane.session.world import gpu_driver_present

RULE = "gpus"
DESCRIPTION = "the node shows the GPUs it should have"
DEVICES = ("auto", "cuda", "cpu")


def accept_device(value: Any) -> str:
    """``device=auto|cuda|cpu`` of accept, checked."""
    text = str(value or "auto").strip().lower()
    if text not in DEVICES:
        raise InputError(f"device: {value!r}; expected one of {', '.join(DEVICES)}")
    return text


def expected_gpus(given: Any, rules_spec: Mapping[str, Any]) -> int | None:
    """The GPUs the node should have: ``gpus=N``, else the rule set's ``expect.gpus``."""
    block = rules_spec.get("expect") or {}
    if not isinstance(block, Mapping):
        raise InputError("rules.expect: expected a mapping such as {gpus: 8}")
    unknown = sorted(str(k) for k in block if str(k) != "gpus")
    if unknown:
        raise InputError(f"rules.expect: unknown key(s) {', '.join(unknown)}; known: gpus")
    for where, value in (("gpus", given), ("rules.expect.gpus", block.get("gpus"))):
        if value is None:
            continue
        if isinstance(value, bool) or not str(value).strip().isdigit() or int(str(value)) < 1:
            raise InputError(f"{where}: {value!r}; expected the GPUs this node should have (1+)")
        return int(str(value))
    return None


def why_no_gpus() -> str:
    """The likeliest reason this process sees no GPU, in words."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        return "CUDA_VISIBLE_DEVICES is set and empty: it hides every GPU"
    if not gpu_driver_present():
        return "no NVIDIA driver is loaded (no /dev/nvidia* device, no /proc/driver/nvidia)"
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except ImportError:
        return "the driver is loaded but NVML (pynvml) is not installed to count the GPUs"
    except Exception as err:  # an NVMLError: its text names the fault
        return f"NVML error: {err}"
    if visible is not None:
        return f"NVML counts {count} GPU(s); CUDA_VISIBLE_DEVICES={visible} hides the rest"
    return f"NVML counts {count} GPU(s)"


def gpu_checks(expected: int | None, seen: int, device: str) -> tuple[list[Check], list[Missing]]:
    """The check line on the GPU count (with an expectation) or, with none on a node where
    no GPU is visible, the missing expectation that makes the verdict INCOMPLETE."""
    if device == "cpu":
        return [], []
    if expected is None:
        if seen > 0:
            return [], []
        why = f"no GPU is visible ({why_no_gpus()}); the suite measured CPU processes only"
        supply = "gpus=N (the GPUs this node should have), or device=cpu for a CPU node"
        return [], [Missing(RULE, why, supply, DESCRIPTION)]
    if seen == expected:
        return [
            Check(
                RULE,
                PASS,
                "expected",
                "node",
                f"{seen} GPU(s), as expected",
                DESCRIPTION,
                value=seen,
                threshold=expected,
            )
        ], []
    cause = why_no_gpus() if seen < expected else "more than the rule set or gpus= says"
    message = f"{seen} GPU(s) visible, expected {expected}: {cause}"
    return [
        Check(RULE, FAIL, "expected", "node", message, DESCRIPTION, value=seen, threshold=expected)
    ], []


def stored_rows_checks(frame: pd.DataFrame, device: str) -> list[Missing]:
    """``accept run=`` over rows that were all measured on CPU processes (gloo ranks, MPI
    through host memory): the missing expectation that makes the verdict INCOMPLETE, as
    a live suite on a node without GPUs is. ``device=cpu`` accepts them knowingly."""
    if device == "cpu" or frame.empty:
        return []
    if not (machine_frame(frame)["gpu"] == CPU).all():
        return []
    why = "the stored rows were measured on CPU processes only: no GPU figure in them"
    return [Missing(RULE, why, "device=cpu to accept CPU rows knowingly", DESCRIPTION)]
