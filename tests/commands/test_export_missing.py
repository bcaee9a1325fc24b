"""`gpulane export` where prometheus-client is not installed (the README's first command
installs no monitor extra): one error line naming the extra, no traceback."""

from __future__ import annotations

import subprocess
import sys


def test_export_without_prometheus_client_is_one_line() -> None:
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from gpulane.cli import main; sys.exit(main(['export', 'runs']))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        "gpulane: error: gpulane export needs prometheus_client: pip install 'gpulane[monitor]'"
    ]


def test_export_help_works_without_prometheus_client() -> None:
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from gpulane.cli import main; sys.exit(main(['export', '--help']))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "usage: gpulane export" in p.stdout and "gpulane[monitor]" in p.stdout
