"""argparse for gpulane's commands: a usage error is one `gpulane: error:` line and exit 2,
like every other bad input (argparse itself prints usage and its own prefix)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from gpulane.errors import InputError


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InputError(f"{self.prog}: {message} (see {self.prog} --help)")
