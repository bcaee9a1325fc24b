"""`gpulane collect RUN_DIR`: finish a run left running with launcher.wait=false (Slurm's,
or any launcher's that can be followed again: Launcher.attach)."""

from __future__ import annotations

from gpulane.commands.args import ArgumentParser
from gpulane.session.collect import collect


def main(argv: list[str]) -> int:
    parser = ArgumentParser(
        prog="gpulane collect",
        description="Wait for a run left running (launcher.wait=false, e.g. on Slurm), then "
        "show its table, write its error row if it failed, and the Parquet copy.",
    )
    parser.add_argument("run_dir", help="the run directory the submission printed")
    parser.add_argument(
        "--no-wait", action="store_true", help="only say the run's state if it has not ended"
    )
    args = parser.parse_args(argv)
    return collect(args.run_dir, wait=not args.no_wait)
