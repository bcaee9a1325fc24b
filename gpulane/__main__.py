"""``python -m gpulane``: the ``gpulane`` command."""

import sys

from gpulane.cli import main

if __name__ == "__main__":
    sys.exit(main())
