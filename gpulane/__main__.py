"""`python -m gpulane` is the `gpulane` command."""

import sys

from gpulane.cli import main

sys.exit(main())
