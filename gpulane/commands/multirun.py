"""Hydra multirun (``-m``) hooks, named in the configuration (``hydra.callbacks``).

:class:`CompareCallback` (conf/common.yaml, so every command has it): when a multirun is
over, the compare table of the runs it made, first to last, and the same comparison as
a page, ``compare.html`` in the multirun directory (``hydra.sweep.dir``). A run that was
stopped (Ctrl-C, SIGTERM: its error row says so) is partial and left out. A stop ends the
whole multirun at once, with the exit status of the stop (130, 143): the runs after the
stopped one are not started, and the line on stderr names the run stopped.

:class:`SlurmArrayCallback` (conf/launcher/slurm.yaml): under ``-m`` it copies
``launcher.*`` into ``hydra.launcher`` before hydra-submitit-launcher submits the job
array (the launcher's :meth:`~gpulane.launch.base.Launcher.array_settings`), or, with
``campaign.pack=true``, swaps in Hydra's basic launcher so that every combination is
queued here and one packed launch runs them all (:mod:`gpulane.session.packing`); with
``campaign.dry_run=true`` each combination prints what it would submit, in this process.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, flag_override

from gpulane.config.campaign import campaign_of
from gpulane.config.commands import SweepConfig
from gpulane.config.load import typed
from gpulane.errors import (
    STDOUT_GONE,
    GpulaneError,
    InputError,
    print_error,
    print_warning,
)
from gpulane.launch.registry import entry, launcher_config
from gpulane.session.packing import finish_packing, start_packing
from gpulane.session.signals import Stop, take_stop

BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


class SlurmArrayCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not str(config.hydra.launcher.get("_target_", "")).endswith("SlurmLauncher"):
            return
        sweep = typed(config, SweepConfig)
        try:
            camp = campaign_of(sweep)
            if camp.pattern != "allocation":
                raise InputError(
                    f"campaign.pattern={camp.pattern} submits its own jobs; run it without -m"
                )
            options = launcher_config(sweep)
            launcher = entry(options.name).launcher
            values = launcher.array_settings(launcher.prepare(sweep, options, None))
        except InputError as err:
            print_error(err)
            raise SystemExit(err.exit_code) from None
        if camp.pack or camp.dry_run:
            # Hydra's basic launcher calls the task in this process once per combination:
            # packed, the task queues it and on_multirun_end starts one launch; a dry run
            # prints what each would submit, and nothing is submitted.
            if not camp.dry_run:
                start_packing()
            with flag_override(config, ["struct", "readonly"], [False, False]):
                config.hydra.launcher = OmegaConf.create({"_target_": BASIC_LAUNCHER})
            return
        with flag_override(config, ["struct", "readonly"], [False, False]):
            for key, value in values.items():
                config.hydra.launcher[key] = value

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        status = finish_packing()
        if status:
            raise SystemExit(status)


COMPARE_PAGE = "compare.html"


class CompareCallback(Callback):
    """The compare table and page of the runs a multirun made (run directories that
    appeared under ``results_dir`` while it ran)."""

    def __init__(self) -> None:
        self.root: Path | None = None
        self.before: set[Path] = set()
        self.sweep_dir: Path | None = None
        self.jobs: list[str] = []

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from gpulane.analysis.store import find_run_dirs

        self.root = Path(str(config.get("results_dir") or "runs"))
        self.before = set(find_run_dirs(self.root))
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        self.jobs = sweep_jobs([str(o) for o in config.hydra.overrides.task])
        take_stop()  # a stop of an earlier run in this process is not this multirun's

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        """A run that was stopped stops the multirun: what ran whole is compared, the
        stopped run named, and the runs after it never start (SystemExit passes through
        Hydra's launcher and its callbacks' ``except Exception``)."""
        stop = take_stop()
        if stop is None:
            return
        num = int(config.hydra.job.get("num", 0) or 0)
        if stop.code != STDOUT_GONE:  # a reader that went away reads nothing more
            self.on_multirun_end(config)
            sys.stderr.write(f"gpulane: {stopped_line(stop, num, self.jobs)}\n")
            sys.stderr.flush()
        raise SystemExit(stop.code)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.root is None:
            return
        try:
            compare_runs(self.root, self.before, self.sweep_dir)
        except GpulaneError as err:  # the runs stand; only their comparison is missing
            print_warning(f"multirun: no comparison: {err}")


def sweep_jobs(overrides: list[str]) -> list[str]:
    """The multirun's jobs in the order Hydra's basic sweeper runs them (the product of
    every ``key=a,b`` in the order given), each as its swept values ("build=b"); [] when
    the overrides cannot be read here (the stop line then gives no count)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # Hydra read them to start the multirun; this is only a label
        return []
    lists = [
        [f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()]
        for o in parsed
        if o.is_sweep_override()
    ]
    return [" ".join(combo) for combo in itertools.product(*lists)] if lists else []


def stopped_line(stop: Stop, num: int, jobs: list[str]) -> str:
    """ "interrupted: run 2 of 3 (build=b, run ID) stopped, left out of the comparison; not
    started: build=c" """
    which = f"run {num + 1} of {len(jobs)}" if num < len(jobs) else f"run {num + 1}"
    named = [jobs[num]] if num < len(jobs) else []
    named += [stop.run_id] if stop.run_id else []
    label = f" ({', '.join(named)})" if named else ""
    state = "partial, left out of the comparison" if stop.measured else "nothing measured"
    rest = jobs[num + 1 :]
    later = f"; not started: {', '.join(rest)}" if rest else ""
    return f"{stop.what}: multirun stopped at {which}{label}: {state}{later}"


def compare_runs(root: Path, before: set[Path], sweep_dir: Path | None) -> None:
    from gpulane.analysis.compare import compare, print_terminal
    from gpulane.analysis.export.schema import stopped_runs
    from gpulane.analysis.run_labels import swept_labels
    from gpulane.analysis.store import find_run_dirs, load_frame
    from gpulane.commands.compare import html_page

    made = sorted(set(find_run_dirs(root)) - before, key=lambda d: d.name)
    frames = [(d, load_frame([d])) for d in made]
    # A stopped run's error row marks it partial (the mark export reads too): its figures
    # are missing points, not slower ones.
    partial = [d for d, f in frames if stopped_runs(f)]
    if partial:
        print(f"# multirun: left out, stopped before its end: {', '.join(d.name for d in partial)}")
        frames = [(d, f) for d, f in frames if d not in partial]
    if len(frames) < 2:
        whole = " whole" if partial else ""
        print(f"# multirun: {len(frames)}{whole} run(s) made, nothing to compare")
        return
    builds = [sorted({str(b) for b in f["build"].dropna()}) for _, f in frames]
    # the runs' build labels when they tell the runs apart (-m preset=...), else what was
    # swept (-m dtype=float,half: one build; "dtype=half")
    labels = swept_labels([d for d, _ in frames], [b[0] if len(b) == 1 else "" for b in builds])
    sides = [(label, f) for label, (_, f) in zip(labels, frames, strict=True)]
    cmp = compare(sides)
    print(f"# multirun: {len(frames)} runs compared, ratios to the first")
    print_terminal(cmp)
    if cmp.table.empty or sweep_dir is None:
        return
    page = sweep_dir / COMPARE_PAGE
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        page.write_text(html_page(cmp, sides, None), encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot write {page}: {err.strerror or err}") from err
    print(f"# page: {page}")
