"""A ScoringRun scores artifacts; the panel and CBU are a Trial's steps (its own pods and gateway tokens). A run of
external artifacts or a campaignRef that asks for them is refused with the field and the fix — never run without
them as if they were done (what the local engine cannot mean either)."""

from __future__ import annotations

from typing import Any

import pytest

from anchorage.controller import scoring
from anchorage.errors import InputError


def _run(source: dict[str, Any], verification: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "r", "namespace": "default"}, "spec": {**source, "verification": verification}}


ARTIFACTS = {"task": "smoke-inventory", "artifacts": [{"uri": "file:///tmp/a.json", "entry": "x"}]}


@pytest.mark.parametrize("source", [ARTIFACTS, {"campaignRef": "c"}], ids=["artifacts", "campaignRef"])
def test_panel_and_cbu_on_a_run_without_a_trial_are_refused(source: dict[str, Any]) -> None:
    with pytest.raises(InputError) as caught:
        scoring.start(_run(source, {"panel": {"model": "m"}, "cbu": {"model": "m"}}))
    message = caught.value.message
    assert "spec.verification.panel runs as a step of a Trial" in message
    assert "spec.verification.cbu runs as a step of a Trial" in message and "set it on the Trial or the campaign" in message
