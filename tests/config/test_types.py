"""Typed configuration: how many fields are still ``Any`` (at most 5, where a value
really is open), the capabilities of every backend and launcher option, and the kinds of
value the union keys take."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
import typing
from pathlib import Path
from typing import Annotated, Any

import pytest
from omegaconf import OmegaConf

import gpulane.config
from gpulane.config.backend import BACKENDS, BackendConfig
from gpulane.config.capabilities import backend_of, launcher_of
from gpulane.config.commands import CopyConfig, SweepConfig, TokensConfig
from gpulane.config.launcher import (
    LAUNCHERS,
    LauncherConfig,
    LocalLauncherConfig,
    MpirunLauncherConfig,
)
from gpulane.config.types import check_types, conforms, declared
from gpulane.config.validate import check
from gpulane.errors import InputError

MOST_ANY = 5


def _config_dataclasses() -> list[type]:
    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(gpulane.config.__path__):
        module = importlib.import_module(f"gpulane.config.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__.startswith("gpulane.config")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def _has_any(hint: Any) -> bool:
    """Any anywhere in a field's type; a union key (``Annotated[Any, union]``) counts by
    the union it declares, which the front holds every value to."""
    if hint is Any:
        return True
    if typing.get_origin(hint) is Annotated:
        if hint.__origin__ is Any:
            return _has_any(declared(hint))
        return _has_any(hint.__origin__)
    return any(_has_any(a) for a in typing.get_args(hint) if not isinstance(a, str))


def any_fields() -> list[str]:
    out = []
    for schema in _config_dataclasses():
        hints = typing.get_type_hints(schema, include_extras=True)
        own = inspect.get_annotations(schema)  # each field counted where it is declared
        for f in dataclasses.fields(schema):
            if f.name in own and _has_any(hints[f.name]):
                out.append(f"{schema.__name__}.{f.name}")
    return out


def test_at_most_five_fields_are_any() -> None:
    found = any_fields()
    assert len(found) <= MOST_ANY, found
    # The ones left hold a user's open mapping (a model file, a rule set, projections).
    assert set(found) <= {
        "TokensConfig.model",
        "AdviseConfig.model",
        "AcceptConfig.rules",
        "AdviseConfig.projection",
    }, found


def test_the_count_sees_an_any_field() -> None:
    @dataclasses.dataclass
    class Loose:
        a: Any = None
        b: dict[str, Any] = dataclasses.field(default_factory=dict)
        c: int = 0

    hints = typing.get_type_hints(Loose, include_extras=True)
    assert [n for n in ("a", "b", "c") if _has_any(hints[n])] == ["a", "b"]


def test_group_fields_are_typed_by_their_bases() -> None:
    hints = typing.get_type_hints(SweepConfig)
    assert hints["backend"] is BackendConfig and hints["launcher"] is LauncherConfig
    assert all(issubclass(c, BackendConfig) for c in BACKENDS.values())
    assert all(issubclass(c, LauncherConfig) for c in LAUNCHERS.values())


BACKEND_CAPABILITIES = {
    #          needs_mpi uses_nccl needs_gpus gloo_on_cpus runs_program chosen_at_start
    "auto": (False, True, False, True, False, True),
    "torch": (False, True, False, True, False, False),
    "nccl": (False, True, True, False, False, False),
    "nccl_tests": (False, True, True, False, True, False),
    "mpi": (True, False, False, False, False, False),
}


@pytest.mark.parametrize("name", sorted(BACKEND_CAPABILITIES))
def test_backend_capabilities(name: str) -> None:
    b = BACKENDS[name]()
    got = (b.needs_mpi, b.uses_nccl, b.needs_gpus, b.gloo_on_cpus, b.runs_program)
    assert (*got, b.chosen_at_start) == BACKEND_CAPABILITIES[name]
    assert b.times_torch_beside == (name == "nccl")


LAUNCHER_CAPABILITIES = {
    # remote_world places_on_nodes on_this_host starts_mpi runs_host_jobs resumes
    "local": (False, False, True, False, True, True),
    "mpirun": (False, True, True, True, False, False),
    "slurm": (True, True, False, True, False, False),
}


@pytest.mark.parametrize("name", sorted(LAUNCHER_CAPABILITIES))
def test_launcher_capabilities(name: str) -> None:
    la = LAUNCHERS[name]()
    got = (la.remote_world, la.places_on_nodes, la.on_this_host, la.starts_mpi)
    assert (*got, la.runs_host_jobs, la.resumes) == LAUNCHER_CAPABILITIES[name]


def test_mpirun_with_a_hostfile_is_not_on_this_host() -> None:
    assert not MpirunLauncherConfig(hostfile="hosts.txt").on_this_host


def test_capabilities_of_a_composed_node() -> None:
    node = OmegaConf.create(
        {"backend": {"name": "mpi", "buffers": "host"}, "launcher": {"name": "slurm", "nodes": 2}}
    )
    assert backend_of(node).needs_mpi and launcher_of(node).remote_world
    assert launcher_of(node).nodes == 2  # type: ignore[attr-defined]
    # A command without a launcher key runs on this host's processes.
    assert launcher_of(TokensConfig()) == LocalLauncherConfig()
    with pytest.raises(InputError, match="launcher=k8s: no such option"):
        launcher_of(OmegaConf.create({"launcher": {"name": "k8s"}}))


def test_choices_are_checked_by_the_option() -> None:
    with pytest.raises(InputError, match=r"^backend.loop: expected auto, python or c, got 'x'$"):
        BACKENDS["nccl"](loop="x").validate()  # type: ignore[call-arg]
    with pytest.raises(InputError, match=r"backend\.register=true needs backend\.memory=nccl"):
        BACKENDS["nccl"](register=True, memory="torch").validate()  # type: ignore[call-arg]
    with pytest.raises(InputError, match=r"^launcher.bind: expected none or core, got 'all'$"):
        LocalLauncherConfig(bind="all").validate()  # type: ignore[arg-type]
    LocalLauncherConfig(bind="core").validate()


@pytest.mark.parametrize(
    ("value", "ok"),
    [("auto", True), ("AUTO", True), (4, True), (True, False), ("four", False), ([2], False)],
)
def test_auto_or_int(value: Any, ok: bool) -> None:
    kind = declared(typing.get_type_hints(SweepConfig, include_extras=True)["ranks"])
    assert conforms(value, kind) is ok


def _sweep(**kw: Any) -> SweepConfig:
    return SweepConfig(
        backend=BACKENDS["torch"](), launcher=LocalLauncherConfig(), device="cpu", **kw
    )


def test_a_value_of_the_wrong_kind_is_one_error() -> None:
    check(_sweep(collectives=["all_reduce"], dtype="float,half"))
    with pytest.raises(InputError, match=r"^collectives: expected a list of words or a word"):
        check(_sweep(collectives=5))
    with pytest.raises(InputError, match=r"^sizes.max: expected a whole number or a word"):
        check(_sweep(sizes=dataclasses.replace(SweepConfig().sizes, max=[1])))
    with pytest.raises(InputError, match=r"^peer_access: expected a list of true/false"):
        check_types(CopyConfig(peer_access=["yes"]))


# A comparison of a backend's name with an option's name (or of a name with one of the
# backends' words): outside launch/ and config/, capabilities say these things. Launchers
# are held by what they are, not by a pattern: import-linter's contract "only launchers
# know Slurm" (pyproject.toml) and tests/launch/test_remote_plugin.py, a launcher from
# outside the package that runs sweep, pairs and collect with no core file naming it.
NAME_TEST = re.compile(
    r"backend[a-z_]*(\.name|\[.name.\]|\.get\(.name.\))\)? *(==|!=|in |not in)"
    r"|name (==|!=|in|not in) *\(?[\"'](mpi|nccl|nccl_tests|torch|auto)[\"']"
    r"|backend in \(\"nccl|backend == \"nccl"
)


def test_no_code_outside_launch_and_config_tests_a_name() -> None:
    root = Path(gpulane.config.__file__).parents[1]
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in ("launch", "config"):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if NAME_TEST.search(line):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert found == []


def test_the_name_test_pattern_finds_one() -> None:
    assert NAME_TEST.search('    if str(cfg.backend.name) == "nccl":')
    assert NAME_TEST.search('    if backend in ("nccl", "nccl_tests") and device == "cpu":')
    assert not NAME_TEST.search("    if launcher_of(cfg).remote_world:")
