"""Mistakes on a Hydra command's line that Hydra would answer with a parser error, each
answered with the fix a person would give: a leading dash (``--sizes.max=1M``), a value
after a space instead of a comma (``collectives=all_reduce all_gather``), a word that is
not KEY=VALUE, and Hydra's config-directory flags, which gpulane does not offer (a user's
own model is ``model=PATH.yaml``)."""

from __future__ import annotations

from gpulane.errors import InputError

# Hydra's flags that gpulane passes through, and those of them that take a value.
HYDRA_FLAGS = {
    "-m", "--multirun", "--cfg", "-c", "--package", "-p", "--resolve", "--info", "-i",
    "--hydra-help", "--version", "--shell-completion", "-sc", "--run", "-r", "--help", "-h",
}  # fmt: skip
TAKES_VALUE = {"--cfg", "-c", "--package", "-p", "--info", "-i"}
# Hydra runs in one of these modes per call.
MODES = {
    "-m": "-m", "--multirun": "-m", "--cfg": "--cfg", "-c": "--cfg", "--info": "--info",
    "-i": "--info", "--shell-completion": "--shell-completion", "-sc": "--shell-completion",
    "--run": "--run", "-r": "--run",
}  # fmt: skip
CONFIG_FLAGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn")


def check_argv(argv: list[str], command: str) -> None:
    """Raise one InputError for the first argument that is no override or Hydra flag."""
    modes = {MODES[a] for a in argv if a in MODES}
    if len(modes) > 1:
        raise InputError(f"{' and '.join(sorted(modes))}: one of them at a time")
    previous: str | None = None  # the last KEY=VALUE, for "use a comma"
    skip = False
    for arg in argv:
        if skip:
            skip = False
            if "=" not in arg and not arg.startswith("-"):
                continue
        if arg in HYDRA_FLAGS:
            skip = arg in TAKES_VALUE
            continue
        if arg.split("=")[0] in CONFIG_FLAGS:
            raise InputError(
                f"{arg.split('=')[0]}: not offered by gpulane {command}; give your own model "
                "file as model=PATH.yaml (or model=PATH/config.json)"
            )
        if arg.startswith("-"):
            body = arg.lstrip("-")
            if "=" in body:
                raise InputError(
                    f"{arg}: Hydra overrides have no leading dashes: write {body} "
                    f"(gpulane {command} --help lists the keys)"
                )
            raise InputError(
                f"{arg}: not an option of gpulane {command}; settings are KEY=VALUE "
                f"(gpulane {command} --help lists them)"
            )
        if "=" not in arg and arg.startswith("~"):  # Hydra's ~key: delete a key
            continue
        if "=" not in arg:
            if previous is not None:
                key, _, value = previous.partition("=")
                raise InputError(
                    f"{arg!r} has no KEY=: several values of {key.lstrip('+~')} are one "
                    f"argument joined by a comma: {key}={value},{arg}"
                )
            raise InputError(f"{arg!r}: not KEY=VALUE (gpulane {command} --help lists the keys)")
        previous = arg
