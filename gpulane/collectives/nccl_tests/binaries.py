"""Finding the user's own nccl-tests binaries, and what their ``-h`` says they support.

gpulane never downloads or builds nccl-tests. It looks in ``backend.home``, then
``$NCCL_TESTS_HOME``, each also with ``build/``, then ``PATH``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpulane.errors import MissingComponent

HELP_TIMEOUT_S = 30.0


def search_dirs(home: str | None, environ: dict[str, str] | None = None) -> list[tuple[str, Path]]:
    """(where, directory) in the order gpulane looks for nccl-tests binaries."""
    environ = dict(os.environ) if environ is None else environ
    dirs: list[tuple[str, Path]] = []
    if home:
        base = Path(str(home)).expanduser()
        dirs += [("backend.home", base), ("backend.home", base / "build")]
    env_home = environ.get("NCCL_TESTS_HOME")
    if env_home:
        base = Path(env_home).expanduser()
        dirs += [("NCCL_TESTS_HOME", base), ("NCCL_TESTS_HOME", base / "build")]
    for entry in environ.get("PATH", "").split(os.pathsep):
        if entry:
            dirs.append(("PATH", Path(entry)))
    return dirs


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_binaries(
    binaries: list[str], home: str | None, environ: dict[str, str] | None = None
) -> dict[str, Path]:
    """Each binary's path; one MissingComponent naming every place looked in otherwise."""
    environ = dict(os.environ) if environ is None else environ
    dirs = search_dirs(home, environ)
    found: dict[str, Path] = {}
    for name in binaries:
        for _, d in dirs:
            if _executable(d / name):
                found[name] = d / name
                break
    missing = [b for b in binaries if b not in found]
    if missing:
        looked = []
        looked.append(
            "backend.home=" + (str(Path(str(home)).expanduser()) + " (and its build/)")
            if home
            else "backend.home (not set)"
        )
        env_home = environ.get("NCCL_TESTS_HOME")
        looked.append(
            f"NCCL_TESTS_HOME={env_home} (and its build/)"
            if env_home
            else "NCCL_TESTS_HOME (not set)"
        )
        path = environ.get("PATH", "")
        looked.append(f"PATH={path}" if path else "PATH (empty)")
        raise MissingComponent(
            f"nccl-tests: {', '.join(missing)} not found; looked in {'; '.join(looked)}. "
            "gpulane runs your own nccl-tests build and never downloads or builds it: build it "
            "(git clone https://github.com/NVIDIA/nccl-tests; make, or make MPI=1 for "
            "launcher=mpirun/slurm) and point gpulane at it with backend.home=DIR, "
            "NCCL_TESTS_HOME=DIR, or PATH"
        )
    return found


_HELP_CACHE: dict[str, str] = {}


def help_text(binary: Path, env: dict[str, str] | None = None) -> str:
    """What ``binary -h`` prints (empty when it cannot run); cached per path."""
    key = str(binary)
    if key not in _HELP_CACHE:
        try:
            proc = subprocess.run(
                [str(binary), "-h"],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=HELP_TIMEOUT_S,
                env=env,
                stdin=subprocess.DEVNULL,
            )
            _HELP_CACHE[key] = (proc.stdout or "") + (proc.stderr or "")
        except (OSError, subprocess.SubprocessError):
            _HELP_CACHE[key] = ""
    return _HELP_CACHE[key]


def supports_json(help_output: str) -> bool:
    return "-J," in help_output or "--output_file" in help_output


def supports_per_iter(help_output: str) -> bool:
    return "-I," in help_output or "--per_iter_timing" in help_output
