"""Run a Hydra-configured command (sweep, copy, tokens, accept, advise) from the CLI.

Before Hydra runs anything, the overrides are composed once with the command's typed
schema (gpulane.config): an unknown key, a value of the wrong type, a group option that
does not exist or an override Hydra cannot read becomes one ``gpulane: error:`` line and
exit 2, naming the key (and the closest valid one) instead of Hydra's several lines and
exit 1. Then Hydra runs the job (``-m``: every combination); the job gets its
configuration as the typed object. A :class:`GpulaneError` inside a job is one line and
turns into the exit status; under multirun the other jobs still run and the worst status
is returned.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable
from typing import Any

from gpulane.config.commands import COMMANDS
from gpulane.errors import GpulaneError, InputError, print_error

# Hydra, OmegaConf's errors and the checks are imported where they are used, so that
# `gpulane sweep --help` prints without loading Hydra.

Task = Callable[[Any], int]
# Arguments that make Hydra print something and stop: nothing to check first.
HYDRA_INFO = (
    "--help",
    "-h",
    "--hydra-help",
    "--cfg",
    "-c",
    "--info",
    "--version",
    "--shell-completion",
)


def comma_lists(argv: list[str], keys: frozenset[str] | set[str]) -> list[str]:
    """``key=a,b`` as the list ``key=[a,b]`` for the given keys (Hydra would refuse it as an
    ambiguous sweep), except under -m/--multirun, where a comma list sweeps as Hydra means."""
    if any(a in ("-m", "--multirun") for a in argv):
        return argv
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+~") in keys and "," in value and value[:1] not in "[\"'":
            arg = f"{key}=[{value}]"
        out.append(arg)
    return out


def combinations(overrides: list[str]) -> list[list[str]]:
    """The combinations that, between them, hold every value of every sweep (``-m
    key=a,b``): the first of each, then each later value with the others at their first,
    so a mistyped last value is found before the first run starts. Hydra's own keys are
    left out (Hydra checks those itself)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except OverrideParseException as err:
        bad = next((o for o in overrides if _unreadable(o)), overrides[0] if overrides else "")
        raise InputError(f"cannot read the override {bad!r}: {str(err).splitlines()[0]}") from None
    first: list[str] = []
    later: list[tuple[int, str]] = []  # (index in first, the override with another value)
    for o in parsed:
        key = o.get_key_element()
        if key.lstrip("+~").startswith(("hydra.", "hydra/")):
            continue
        if o.is_sweep_override():
            values = list(o.sweep_string_iterator())
            if not values:
                continue
            later += [(len(first), f"{key}={v}") for v in values[1:]]
            first.append(f"{key}={values[0]}")
        else:
            first.append(o.input_line or f"{key}={o.get_value_element_as_str()}")
    out = [first]
    for index, override in later:
        out.append([*first[:index], override, *first[index + 1 :]])
    return out


def first_combination(overrides: list[str]) -> list[str]:
    """The overrides with every sweep (``-m key=a,b``) at its first value."""
    return combinations(overrides)[0]


def _unreadable(override: str) -> bool:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        OverridesParser.create().parse_overrides([override])
    except OverrideParseException:
        return True
    return False


def check_overrides(config_name: str, overrides: list[str], hydra_node: bool = False) -> Any:
    """Compose the command's configuration once; one InputError for whatever is wrong.

    Returns the composed configuration (with its ``hydra`` node when ``hydra_node``: what
    a single run is then given, without Hydra composing it twice more)."""
    from gpulane.config.store import register
    from gpulane.launch.registry import discover

    discover()  # every launcher module (and $GPULANE_PLUGINS) before the schemas are stored
    register()
    first, *others = combinations(overrides)
    cfg = _check_combination(config_name, first, hydra_node)
    for combo in others:  # -m: every value of every sweep, before the first run
        _check_combination(config_name, combo, False)
    return cfg


def _check_combination(config_name: str, combo: list[str], hydra_node: bool) -> Any:
    from hydra import compose, initialize_config_module
    from hydra.errors import ConfigCompositionException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    from gpulane.config.load import check_keys, config_error, typed
    from gpulane.config.validate import check

    try:
        with initialize_config_module("gpulane.conf", version_base="1.3"):
            cfg = compose(config_name, overrides=combo, return_hydra_config=hydra_node)
    except MissingConfigException as err:
        raise InputError(_missing_option(str(err))) from None
    except ConfigCompositionException as err:
        raise InputError(_composition(err, config_name, combo)) from None
    except OmegaConfBaseException as err:
        raise InputError(config_error(err)) from None
    schema = COMMANDS.get(config_name)
    if schema is not None:
        from omegaconf import OmegaConf

        data = OmegaConf.to_container(cfg, resolve=False)
        assert isinstance(data, dict)
        data.pop("hydra", None)
        check_keys(data, schema)
        config: Any = typed(_without_hydra(cfg), schema)
        check(config)
        if config_name == "sweep":  # collectives, dtypes, sizes: the plan's own checks
            from gpulane.collectives.plan import build_plan

            build_plan(config, on_device=False)
    return cfg


def _without_hydra(cfg: Any) -> Any:
    """The job's part of a configuration composed with its ``hydra`` node."""
    if "hydra" not in cfg:
        return cfg
    from omegaconf import OmegaConf, open_dict

    job = OmegaConf.create(cfg)  # a copy: HydraConfig keeps the original
    with open_dict(job):
        del job["hydra"]
    return job


def _missing_option(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    head = lines[0] if lines else text
    # "In 'sweep': Could not find 'backend/nosuch'"
    wanted = head.split("Could not find")[-1].strip(" '")
    group, _, option = wanted.partition("/")
    options = [ln for ln in lines[1:] if ln.isidentifier() or ("-" in ln and " " not in ln)]
    options = [o for o in options if not o.endswith("_schema") and ":" not in o]
    if group and option:
        close = difflib.get_close_matches(option, options, n=1)
        hint = f" (did you mean {group}={close[0]}?)" if close else ""
        own = (
            " or your own file: model=PATH.yaml or model=PATH/config.json"
            if group == "model"
            else ""
        )
        return f"{group}={option}: no such option{hint}; choose one of {', '.join(options)}{own}"
    return head


def _composition(err: Exception, config_name: str, combo: list[str]) -> str:
    from omegaconf.errors import OmegaConfBaseException

    from gpulane.config.load import FREE_KEYS, config_error, unknown_key

    cause = err.__cause__
    text = str(err).strip()
    if "Could not override" in text:
        key = text.split("'")[1] if "'" in text else text
        head, _, _ = key.rpartition(".")
        given = next((o for o in combo if o.lstrip("+~").partition("=")[0] == key), key)
        if head.rpartition(".")[2] in FREE_KEYS:  # env, sbatch_args: maps of the user's keys
            return (
                f"{given}: {key} is a new key of {head}; add + to create it: +{given.lstrip('+~')}"
            )
        others = [o for o in combo if o.lstrip("+~").partition("=")[0] != key]
        known = _known_under(config_name, head, others)
        return str(unknown_key(key, known, f"{head}." if head else ""))
    if isinstance(cause, OmegaConfBaseException):
        return config_error(cause)
    if "Ambiguous value" in text:
        arg = text.split("'")[1] if "'" in text else text
        key = arg.partition("=")[0]
        return (
            f"{arg}: a comma list; write {key}=[a,b] for a list, quote it for text, "
            "or sweep it with -m"
        )
    return text.splitlines()[0]


def _known_under(config_name: str, dotted: str, combo: list[str]) -> list[str]:
    """The keys of the node at ``dotted`` ("" for the top, "sizes", "backend"): for a group
    (backend, launcher) those of the option chosen, as Hydra composes it without the bad
    override."""
    from hydra import compose, initialize_config_module

    keep = [o for o in combo if "." not in o.partition("=")[0]]
    try:
        with initialize_config_module("gpulane.conf", version_base="1.3"):
            cfg = compose(config_name, overrides=keep)
    except Exception:  # the bad override is the one we explain; no list then
        return []
    node: Any = cfg
    for part in [p for p in dotted.split(".") if p]:
        node = node.get(part) if hasattr(node, "get") else None
        if node is None:
            return []
    return [str(k) for k in node] if hasattr(node, "keys") else []


def run_hydra(config_name: str, task: Task, argv: list[str], prog: str) -> int:
    if any(a in ("--help", "-h") for a in argv):
        from gpulane.commands.help import render

        print(render(config_name))
        return 0
    from gpulane.commands.mistakes import check_argv

    check_argv(argv, config_name)
    import hydra
    from omegaconf import DictConfig

    from gpulane.config.load import typed
    from gpulane.config.store import register
    from gpulane.config.validate import check

    register()
    schema = COMMANDS[config_name]
    statuses: list[int] = []

    def _job(cfg: DictConfig) -> None:
        try:
            config: Any = typed(cfg, schema)
            check(config)
            statuses.append(int(task(config) or 0))
        except GpulaneError as err:
            print_error(err)
            statuses.append(err.exit_code)
        except KeyboardInterrupt:
            print_error("interrupted")
            statuses.append(130)
            raise SystemExit(130) from None

    multirun = any(a in ("-m", "--multirun") for a in argv)
    if not any(a in HYDRA_INFO for a in argv):
        overrides = [a for a in argv if a not in ("-m", "--multirun")]
        # Hydra's own keys (hydra.run.dir=...) are Hydra's to apply: hydra.main then
        own = any(a.lstrip("+~").startswith(("hydra.", "hydra/")) for a in overrides)
        single = not multirun and not own
        composed = check_overrides(config_name, overrides, hydra_node=single)
        if single:
            # One run: the configuration just checked is the job's. hydra.main would
            # compose it twice more (0.5-0.6 CPU-s each, most of a short command's start)
            # for what it adds to a run here: nothing (no output dir, no logging, no chdir).
            from hydra.core.hydra_config import HydraConfig

            HydraConfig.instance().set_config(composed)
            _job(_without_hydra(composed))
            return max(statuses, default=0)
    app: Callable[[], None] = hydra.main(
        config_path="pkg://gpulane.conf", config_name=config_name, version_base="1.3"
    )(_job)

    saved = sys.argv
    sys.argv = [prog, *argv]
    try:
        app()
    except SystemExit as ex:
        # Hydra exits 1 after printing an error of its own (one check_overrides missed).
        code = ex.code if isinstance(ex.code, int) else 1
        if code:
            return code
    finally:
        sys.argv = saved
    return max(statuses, default=0)


def compose_typed(config_name: str, overrides: list[str]) -> Any:
    """``config_name``'s configuration with ``overrides``, as its typed object, for a
    command that is not a Hydra app (compare) or runs inside one (a multirun callback)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    from gpulane.config.load import config_error, typed
    from gpulane.config.store import register

    register()
    try:
        if GlobalHydra.instance().is_initialized():
            cfg = compose(config_name, overrides=overrides)
        else:
            with initialize_config_module("gpulane.conf", version_base="1.3"):
                cfg = compose(config_name, overrides=overrides)
    except MissingConfigException as err:
        raise InputError(_missing_option(str(err))) from None
    except ConfigCompositionException as err:
        raise InputError(_composition(err, config_name, overrides)) from None
    except OmegaConfBaseException as err:
        raise InputError(config_error(err)) from None
    return typed(cfg, COMMANDS[config_name])


def config_options(group: str) -> list[str]:
    """The options of a configuration group (``model``: llama3-8b, tiny, ...)."""
    from importlib.resources import files

    folder = files("gpulane.conf").joinpath(group)
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))
