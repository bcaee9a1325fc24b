"""The project's stand-in libnvidia-ml.so.1 (tests/fixtures/nvml_fake/fake_nvml.c), built
with gcc once per session, for tests that run gpulane through the REAL pynvml over it:
in this process (:func:`machine`) or in a ``python3 -m gpulane`` subprocess
(:func:`run_gpulane`), where pynvml's own ``CDLL("libnvidia-ml.so.1")`` finds the stand-in
through LD_LIBRARY_PATH."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "nvml_fake"
REPO = Path(__file__).resolve().parents[2]
LIB = "libnvidia-ml.so.1"


def build(out_dir: Path) -> Path:
    """Compile the stand-in into ``out_dir``; returns that folder."""
    gcc = shutil.which("gcc")
    assert gcc, "gcc is needed to build tests/fixtures/nvml_fake"  # fail, never skip
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-o", str(out_dir / LIB), str(FAKE / "fake_nvml.c")],
        check=True,
    )
    return out_dir


@pytest.fixture(scope="session")
def nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("nvml_fake"))


@pytest.fixture
def machine(nvml_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """machine("h200x2") makes this process's pynvml answer as that profile's machine;
    ``lost="I:N"``: GPU I stops answering after N calls (GPULANE_NVML_FAKE_LOST)."""
    import pynvml

    def use(profile: str, lost: str | None = None) -> None:
        monkeypatch.setenv("GPULANE_NVML_FAKE_PROFILE", str(FAKE / f"{profile}.profile"))
        if lost is None:
            monkeypatch.delenv("GPULANE_NVML_FAKE_LOST", raising=False)
        else:
            monkeypatch.setenv("GPULANE_NVML_FAKE_LOST", lost)
        # a fresh library each time: the lost-call counter starts again
        lib = nvml_dir / f"copy{len(os.listdir(nvml_dir))}_{LIB}"
        shutil.copy(nvml_dir / LIB, lib)
        monkeypatch.setattr(pynvml, "nvmlLib", ctypes.CDLL(str(lib)))
        monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
        monkeypatch.setattr(pynvml, "_nvmlLib_refcount", 0)

    yield use


def gpulane_env(nvml_dir: Path, profile: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("GPULANE_NVML_FAKE_LOST", None)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(nvml_dir), env.get("LD_LIBRARY_PATH")) if p
    )
    env["GPULANE_NVML_FAKE_PROFILE"] = str(FAKE / f"{profile}.profile")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def run_gpulane(
    nvml_dir: Path, profile: str, *args: str, cwd: Path | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``python3 -m gpulane ARGS`` on the profile's machine (``extra``: more env)."""
    return subprocess.run(
        [sys.executable, "-m", "gpulane", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=gpulane_env(nvml_dir, profile, **extra),
        cwd=cwd,
    )
