"""A source that kept a check from running is said once, under "not checked" (the live
H200 doctor listed `nvlink_errors: nvidia-smi nvlink -e exited 0` under both headings);
a command that exits 0 and prints nothing says so, not "exited 0"."""

from __future__ import annotations

from gpulane.analysis.doctor.model import Report
from gpulane.analysis.doctor.render import render_text, unexplained_absent
from gpulane.topology.evidence.gather import _run


def test_a_source_is_said_under_the_check_it_kept_from_running() -> None:
    why = "`nvidia-smi nvlink -e` printed nothing"
    report = Report(
        host="h200",
        live=True,
        not_run={"nvlink_errors": why, "acs": "lspci: lspci not installed"},
        absent={
            "nvlink_errors": why,
            "lspci": "lspci not installed",
            "memory_peers": "no /sys/kernel/mm/memory_peers (no legacy nv_peer_mem)",
        },
    )
    assert list(unexplained_absent(report)) == ["memory_peers"]
    text = "\n".join(render_text(report))
    assert text.count(why) == 1 and text.count("lspci not installed") == 1
    assert "# sources absent:\n#   memory_peers: no /sys/kernel/mm/memory_peers" in text


def test_nothing_printed_is_not_called_an_exit() -> None:
    assert _run(["true"]) == (None, "`true` printed nothing")
    out, why = _run(["false"])
    assert out is None and why == "`false` exited 1"
