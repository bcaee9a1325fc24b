"""`gpulane export RUN|RESULTS_DIR`: accept verdicts, check margins and key figures as
OpenMetrics (Prometheus, node_exporter's textfile collector, a Pushgateway), JSON or
JUnit, all from one schema (gpulane/analysis/export/schema.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError, MissingComponent

EPILOG = """\
examples:
  gpulane export runs/20261127-0102-nvlink-ab12 --format openmetrics
  gpulane export runs/ --textfile /var/lib/node_exporter/textfile/gpulane.prom
  gpulane export runs/ --push http://127.0.0.1:9091 --job gpulane-accept
  gpulane export runs/accept-group --format junit -o junit.xml

--textfile writes the Prometheus text format through a temporary file and a rename, as
node_exporter's textfile collector needs. exit status: 0 written, 2 a push that failed or
bad input (nothing to export, a path that does not exist). Needs prometheus-client:
pip install 'gpulane[monitor]'.
"""


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="gpulane export",
        description="Accept verdicts, check margins and key figures for monitoring.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="RUN|RESULTS_DIR")
    p.add_argument(
        "--format", choices=("openmetrics", "prometheus", "json", "junit"), default="openmetrics"
    )
    p.add_argument("-o", "--output", help="write here instead of stdout")
    p.add_argument(
        "--textfile", metavar="FILE.prom", help="node_exporter textfile, written atomically"
    )
    p.add_argument("--push", metavar="URL", help="push to this Pushgateway")
    p.add_argument("--job", default="gpulane", help="the Pushgateway job (default gpulane)")
    return p


def _write(path: str, text: str) -> None:
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as err:
        raise InputError(f"{path}: cannot write: {err.strerror or err}") from err


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.textfile and not args.textfile.endswith(".prom"):
        raise InputError(
            f"--textfile {args.textfile}: node_exporter reads only files ending in .prom"
        )
    try:  # only here, so that --help works without the monitor extra
        from gpulane.analysis.export import collect, json_text, junit, openmetrics, prometheus_text
    except ModuleNotFoundError as missing:  # prometheus-client comes with the monitor extra
        raise MissingComponent(
            f"gpulane export needs {missing.name}: pip install 'gpulane[monitor]'"
        ) from missing
    doc = collect(args.target)
    render = {
        "openmetrics": openmetrics,
        "prometheus": prometheus_text,
        "json": json_text,
        "junit": junit,
    }
    text = render[args.format](doc)
    if args.output:
        _write(args.output, text)
    elif not (args.textfile or args.push):
        sys.stdout.write(text)
    if args.textfile:
        from prometheus_client import write_to_textfile

        from gpulane.analysis.export import registry

        try:
            write_to_textfile(args.textfile, registry(doc))
        except OSError as err:
            raise InputError(
                f"--textfile {args.textfile}: cannot write: {err.strerror or err}"
            ) from err
        print(f"# textfile: {args.textfile}", file=sys.stderr)
    if args.push:
        from prometheus_client import push_to_gateway

        from gpulane.analysis.export import registry

        try:
            push_to_gateway(args.push, job=args.job, registry=registry(doc))
        except OSError as err:
            raise MissingComponent(f"--push {args.push}: the push failed: {err}") from err
        print(f"# pushed to {args.push} (job {args.job})", file=sys.stderr)
    return 0
