"""The house rules of DESIGN.md, checked on the source: the floors (import-linter's
contracts in pyproject.toml), no import cycle even through imports inside functions, and
no module past the size where it should become a package."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpulane"
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(path: Path, name: str, known: set[str]) -> Iterator[str]:
    """Every gpulane module ``path`` imports, at the top or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for target in targets:
            # the module itself, or the package that holds it
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("gpulane") and target not in (name, "gpulane"):
                yield target


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: set(imported(path, name, known)) for name, path in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a list of modules, first == last), or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycle_even_inside_functions() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between gpulane's top packages and modules (gpulane.config,
    gpulane.rundir, ...): an arrow for each import from one into another."""

    def top(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, set[str]] = {}
    for source, targets in graph.items():
        out.setdefault(top(source), set()).update(top(t) for t in targets if top(t) != top(source))
    return out


def test_no_arrow_runs_back_up_between_packages() -> None:
    """Modules of one floor may import each other (import-linter's ``:``), but never both
    ways between two packages: config imports rundir, so rundir imports no config."""
    cycle = find_cycle(package_graph(import_graph()))
    assert cycle is None, "packages importing each other: " + " -> ".join(cycle or [])
    planted = package_graph({"gpulane.a.x": {"gpulane.b"}, "gpulane.b": {"gpulane.a.y"}})
    assert find_cycle(planted) == ["gpulane.a", "gpulane.b", "gpulane.a"]


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_over_the_limit() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them along their jobs): {long}"


def test_the_floors_hold() -> None:
    """import-linter's contracts in pyproject.toml (layers, forbidden, independence)."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
