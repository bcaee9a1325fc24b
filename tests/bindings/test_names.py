"""Every name gpulane calls on a GPU library exists in the installed library: pynvml
(nvidia-ml-py), nccl4py, cupy and torch.cuda where installed. The lent 1x H200 failed a
healthy node on two pynvml names no release has (`..._v2`: the C symbols' suffix, which
the Python functions drop); no CPU test went through those lines.

The names are read from gpulane's sources (AST): attributes of a module imported as
`pynvml` / `nvml`, `nccl`, `cupy`/`cp`, and `torch.cuda.X`."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gpulane"
# the names a module is bound to in gpulane's sources -> the module they stand for
ALIASES = {"pynvml": "pynvml", "nvml": "pynvml", "cupy": "cupy", "cp": "cupy"}


def called_names() -> dict[str, set[tuple[str, str]]]:
    """module -> {(attribute, where)} of every `alias.attribute` in gpulane's sources, and
    of `torch.cuda.attribute`."""
    found: dict[str, set[tuple[str, str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(PACKAGE.parent))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            base = node.value
            if isinstance(base, ast.Name) and base.id in ALIASES:
                found.setdefault(ALIASES[base.id], set()).add((node.attr, where))
            elif (
                isinstance(base, ast.Attribute)
                and base.attr == "cuda"
                and isinstance(base.value, ast.Name)
                and base.value.id == "torch"
            ):
                found.setdefault("torch.cuda", set()).add((node.attr, where))
    return found


def test_the_scan_finds_the_nvml_calls() -> None:
    nvml = {name for name, _ in called_names()["pynvml"]}
    # the calls the copy job and the live probe make: the scan must see them
    assert {"nvmlInit", "nvmlDeviceGetHandleByPciBusId", "NVMLError"} <= nvml


@pytest.mark.parametrize("module", ["pynvml", "torch.cuda", "cupy"])
def test_every_called_name_exists_in_the_installed_library(module: str) -> None:
    names = called_names().get(module, set())
    if module == "cupy" and importlib.util.find_spec("cupy") is None:
        assert names, "gpulane calls cupy: the scan found none of its names"
        return  # not installed here (CPU machines): its names are checked where it is
    lib = importlib.import_module(module)
    missing = sorted(f"{name} ({where})" for name, where in names if not hasattr(lib, name))
    assert not missing, f"{module} has no: {', '.join(missing)}"


def test_the_nccl4py_names_exist() -> None:
    """nccl4py's module as gpulane imports it (`import nccl` in collectives/backends)."""
    import nccl

    used = set()
    for path in sorted((PACKAGE / "collectives" / "backends").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            is_attr = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            if is_attr and node.value.id == "nccl":  # type: ignore[attr-defined]
                used.add(node.attr)  # type: ignore[attr-defined]
    # a name is an attribute or a subpackage (nccl.core, nccl.bindings: these import CUDA's
    # bindings, which a machine without CUDA lacks, so their own names are not read here)
    missing = sorted(
        n for n in used if not hasattr(nccl, n) and importlib.util.find_spec(f"nccl.{n}") is None
    )
    assert used and not missing, f"nccl4py has no: {', '.join(missing)}"
