"""The JSON documents of `gpulane trace --json` (gpulane.analysis.trace.jsondoc)."""

from __future__ import annotations

import json

from gpulane.analysis.trace import jsondoc
from gpulane.analysis.trace.diff import compare
from tests.analysis.trace.traces import (
    pair,
)


def test_json_documents() -> None:
    bad, _good, sb, sg = pair()
    doc = jsondoc.trace_json(bad, sb)
    text = json.dumps(doc)
    back = json.loads(text)
    assert back["read"]["complete"] is True
    assert len(back["copies"]) == 4 and back["copies"][0]["gbps"] > 0
    assert back["summary"]["histogram"][1]["label"] == "5-20"
    changes = jsondoc.change_json(compare(sb, sg))
    assert any(c["metric"] == "blocking_us" and c["better"] for c in changes)
