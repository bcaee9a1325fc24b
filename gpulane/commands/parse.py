"""`gpulane parse FORMAT FILE...`: other tools' printouts as gpulane result rows (the
formats and their importer contract: gpulane.session.imports)."""

from __future__ import annotations

import importlib
from types import ModuleType

from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError
from gpulane.session.imports import FORMATS, ImportRequest, import_files, importer, usage

EXIT_HELP = (
    "exit status: 0 when every FILE measured something, 1 when every run in a FILE failed "
    "(its error rows are still printed and written), 2 for a FILE that cannot be read or "
    "is not this format's output"
)


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
        raise InputError(f"parse: unknown format {name!r}; formats: {', '.join(FORMATS)}")
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
    return import_files(req)
