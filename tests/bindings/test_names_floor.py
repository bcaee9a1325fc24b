"""Every pynvml name gpulane calls exists in the floor release pyproject.toml pins
(nvidia-ml-py>=FLOOR), not only in the release installed here. The floor's wheel is
installed into a temporary folder; a machine that cannot download it fails this test."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.bindings.test_names import called_names

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def floor() -> str:
    found = re.search(r'"nvidia-ml-py>=([0-9.]+)"', PYPROJECT.read_text(encoding="utf-8"))
    assert found, "pyproject.toml pins no nvidia-ml-py floor"
    return found.group(1)


@pytest.fixture(scope="session")
def floor_pynvml(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    target = tmp_path_factory.mktemp("nvml_floor")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    subprocess.run([*cmd, f"nvidia-ml-py=={floor()}"], check=True, timeout=300)
    spec = importlib.util.spec_from_file_location("pynvml_floor", target / "pynvml.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["pynvml_floor"] = module  # pynvml reads its own module from sys.modules
    spec.loader.exec_module(module)
    return module


def test_the_floor_has_every_called_name(floor_pynvml: ModuleType) -> None:
    names = called_names()["pynvml"]
    missing = sorted(f"{n} ({where})" for n, where in names if not hasattr(floor_pynvml, n))
    assert names and not missing, f"nvidia-ml-py {floor()} has no: {', '.join(missing)}"
