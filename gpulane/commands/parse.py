"""`gpulane parse FORMAT FILE...`: other tools' printouts as gpulane result rows (the
formats and their importer contract: gpulane.session.imports)."""

from __future__ import annotations

import difflib
import importlib
import re
from pathlib import Path
from types import ModuleType

from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError
from gpulane.session.imports import FORMATS, ImportRequest, import_files, importer, usage

EXIT_HELP = (
    "exit status: 0 when every FILE measured something, 1 when every run in a FILE failed "
    "(its error rows are still printed and written), 2 for a FILE that cannot be read, is "
    "not this format's output, or holds no result at all (a vLLM log that ends in an error)"
)


# What each format's output says near its top, in the order they are tried (p2p before
# bandwidthtest: both are CUDA samples).
SIGNS: list[tuple[str, re.Pattern[str]]] = [
    ("nvbandwidth", re.compile(r"nvbandwidth Version|Running (host_to_device|device_to_host)")),
    ("p2p", re.compile(r"P2P \(Peer-to-Peer\) GPU Bandwidth|P2P=(Enabled|Disabled)")),
    (
        "bandwidthtest",
        re.compile(r"\[CUDA Bandwidth Test\]|(Host to Device|Device to Host) Bandwidth"),
    ),
    ("nccl-tests", re.compile(r"# nThread \d+ nGpus|algbw +busbw|Avg bus bandwidth")),
    (
        "vllm",
        re.compile(r"Serving Benchmark Result|Avg latency:|^Throughput: .*requests/s|vllm", re.M),
    ),
]


def looks_like(path: str) -> str | None:
    """The format whose output ``path`` looks like (its first 64 KiB), or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return None
    return next((name for name, sign in SIGNS if sign.search(head)), None)


def _unknown_format(name: str, rest: list[str]) -> InputError:
    if Path(name).is_file():  # the format left out: `gpulane parse FILE`
        seen = looks_like(name)
        fmt = seen or "FORMAT"
        return InputError(
            f"parse: the format comes first: gpulane parse {fmt} {name}"
            + ("" if seen else f" (formats: {', '.join(FORMATS)})")
        )
    plain = {f.replace("-", "").replace("_", "").lower(): f for f in FORMATS}
    close = plain.get(name.replace("-", "").replace("_", "").lower())
    if close is None:
        found = difflib.get_close_matches(name.lower(), list(FORMATS), n=1, cutoff=0.6)
        close = found[0] if found else None
    hint = (
        f"; did you mean {close}? (gpulane parse {close} {' '.join(rest) or 'FILE'})"
        if close
        else ""
    )
    return InputError(f"parse: unknown format {name!r}{hint}; formats: {', '.join(FORMATS)}")


def _wrong_format(err: InputError, name: str, files: list[str]) -> InputError:
    """An importer's refusal, with the format the file looks like when it is another."""
    for path in files:
        seen = looks_like(path)
        if seen is not None and seen != name and path in str(err):
            why = str(err).split(": ", 1)[-1]  # the importer's reason, without the path
            why = why.removeprefix(f"not {name} output: ")
            return InputError(
                f"{path}: not {name} output ({why}); this file looks like {seen} output: "
                f"`gpulane parse {seen} {path}`"
            )
    return err


def _parser(name: str, module: ModuleType) -> ArgumentParser:
    ap = ArgumentParser(prog=f"gpulane parse {name}", description=module.WHAT, epilog=EXIT_HELP)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON Lines")
    ap.add_argument("--out", metavar="DIR", help="write the rows into run directory DIR")
    ap.add_argument("--build", help="build label of the rows (default: the importer's)")
    ap.add_argument("--run-id", help="run id of the rows (default: a new one)")
    for option, text in module.OPTIONS.items():
        ap.add_argument(f"--{option}", metavar="X", help=text)
    return ap


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in FORMATS:
        raise _unknown_format(name, rest)
    if ":" in FORMATS[name]:
        module_name, func = FORMATS[name].split(":")
        return int(getattr(importlib.import_module(module_name), func)(rest) or 0)
    module = importer(name)
    try:
        args = _parser(name, module).parse_args(rest)
    except SystemExit as ex:  # --help
        return ex.code if isinstance(ex.code, int) else 2
    options = {o.replace("-", "_"): getattr(args, o.replace("-", "_")) for o in module.OPTIONS}
    req = ImportRequest(name, args.files, args.json, args.out, args.build, args.run_id, options)
    try:
        return import_files(req)
    except InputError as err:
        raise _wrong_format(err, name, args.files) from None
