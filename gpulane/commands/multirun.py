"""Hydra multirun (``-m``) hooks, named in the configuration (``hydra.callbacks``).

:class:`SlurmArrayCallback` (conf/launcher/slurm.yaml): under ``-m`` it copies
``launcher.*`` into ``hydra.launcher`` before hydra-submitit-launcher submits the job
array, or, with ``launcher.pack=true``, swaps in Hydra's basic launcher so that every
combination is queued here and one packed job runs them all
(:mod:`gpulane.session.packing`).
"""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, flag_override

from gpulane.config.commands import SweepConfig
from gpulane.config.load import typed
from gpulane.errors import InputError, print_error
from gpulane.launch.slurm.settings import hydra_launcher_settings, settings
from gpulane.session.packing import finish_packing, start_packing

BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


class SlurmArrayCallback(Callback):  # type: ignore[misc]
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not str(config.hydra.launcher.get("_target_", "")).endswith("SlurmLauncher"):
            return
        sweep = typed(config, SweepConfig)
        try:
            s = settings(sweep)
            if s.pattern != "allocation":
                raise InputError(
                    f"launcher.pattern={s.pattern} submits its own jobs; run it without -m"
                )
        except InputError as err:
            print_error(err)
            raise SystemExit(err.exit_code) from None
        if s.pack:
            # Hydra's basic launcher calls the task in this process once per combination;
            # the task queues it, and on_multirun_end submits one job.
            start_packing()
            with flag_override(config, ["struct", "readonly"], [False, False]):
                config.hydra.launcher = OmegaConf.create({"_target_": BASIC_LAUNCHER})
            return
        values = hydra_launcher_settings(sweep)
        with flag_override(config, ["struct", "readonly"], [False, False]):
            for key, value in values.items():
                config.hydra.launcher[key] = value

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        status = finish_packing()
        if status:
            raise SystemExit(status)
