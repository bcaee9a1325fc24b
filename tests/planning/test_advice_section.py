"""The compare page's advisor section: a card only for a build the advisor has an answer
for, and the others in one line of words each, never the command line's raw error."""

from __future__ import annotations

from gpulane.planning.builds import BuildAdvice, advice_section


def test_builds_without_advice_are_one_line_of_words() -> None:
    builds = [
        BuildAdvice(
            "nvlink",
            None,
            "rows of nvlink",
            "gpulane: error: run: several builds (nvlink, vm); use build=NAME",
        ),
        BuildAdvice("vm", None, "rows of vm", None),
    ]
    html = advice_section(builds)
    assert 'class="card"' not in html
    assert "nvlink: no advice (run: several builds (nvlink, vm))" in html
    assert "vm: no advice (no reason recorded)" in html
    assert "gpulane: error" not in html and "use build=" not in html
