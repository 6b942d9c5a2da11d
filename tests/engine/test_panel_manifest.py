"""``verification.panel`` / ``verification.cbu`` in the manifests: camelCase, unknown keys refused, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from anchorage.campaigns.documents import load_documents
from anchorage.campaigns.planning import plan
from anchorage.errors import InputError
from anchorage.manifests import Trial, VerificationCampaign
from anchorage.runtime.kube.crds import all_crds
from anchorage.verify.settings import CbuSettings, PanelSettings

CAMPAIGN = """\
apiVersion: anchorage.dev/v1alpha1
kind: VerificationCampaign
metadata: {name: panel-manifest}
spec:
  tasks: [smoke-inventory]
  seeds: 2
  entries:
    - {name: a, agent: {kind: oracle}}
  verification:
    panel:
%s
"""


def _campaign(tmp_path: Path, panel: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN % panel)
    return path


def test_panel_and_cbu_parse_with_camel_case_aliases(tmp_path: Path) -> None:
    path = _campaign(tmp_path, "      tier: small\n      maxRevisions: 1\n      maxParallel: 2\n      patternSweep: true\n"
                               "    cbu: {rollouts: 8, relTol: 0.01}")
    campaign = load_documents(path)[0].resource
    assert isinstance(campaign, VerificationCampaign)
    panel = campaign.spec.verification.panel
    assert isinstance(panel, PanelSettings) and panel.tier == "small"
    assert (panel.revisions, panel.max_parallel, panel.sweep, panel.thresholds().confirm) == (1, 2, True, 5)
    assert campaign.spec.verification.cbu == CbuSettings(rollouts=8, rel_tol=0.01)
    dumped = campaign.model_dump(mode="json", by_alias=True, exclude_none=True)["spec"]["verification"]
    assert dumped["panel"]["maxRevisions"] == 1 and dumped["panel"]["patternSweep"] is True
    assert dumped["cbu"]["relTol"] == 0.01
    # every planned trial carries the campaign's panel
    trials = plan("panel-manifest", campaign.spec, ["smoke-inventory"])
    assert len(trials) == 2 and all(t.spec.verification.panel == panel for t in trials)


def test_panel_is_optional_and_off_by_default() -> None:
    trial = Trial.model_validate({"metadata": {"name": "t"}, "spec": {"task": "x", "agent": {"kind": "oracle"}}})
    assert trial.spec.verification.panel is None and trial.spec.verification.cbu is None


@pytest.mark.parametrize(("panel", "line", "expected"), [
    ("      maxRevison: 2", 11, "unknown field 'spec.verification.panel.maxRevison'"),
    ("      tier: huge", 11, "spec.verification.panel.tier"),
    ("      confirm: 6", 11, "must not exceed verifiers=5"),
    ("      verifiers: 3\n      refute: 4", 11, "must not exceed verifiers=3"),
    ("      maxRevisions: 11", 11, "spec.verification.panel.maxRevisions"),
    ("      policy: greedy", 11, "spec.verification.panel.policy"),
])
def test_bad_panel_values_are_reported_at_their_line(tmp_path: Path, panel: str, line: int, expected: str) -> None:
    with pytest.raises(InputError) as caught:
        load_documents(_campaign(tmp_path, panel))
    message = str(caught.value)
    assert f"c.yaml:{line}:" in message and expected in message and "fix:" in message
    assert "--" not in message.split("must not exceed")[-1]     # no CLI flag spelling in a manifest's hint


def test_bad_cbu_values_are_refused() -> None:
    for cbu in ({"rollouts": 0}, {"relTol": -1}, {"rollout": 4}):
        spec = {"task": "x", "agent": {"kind": "oracle"}, "verification": {"cbu": cbu}}
        with pytest.raises(ValidationError) as caught:
            Trial.model_validate({"metadata": {"name": "t"}, "spec": spec})
        assert "verification.cbu" in str(caught.value)


def test_crd_schema_carries_the_panel_fields() -> None:
    crds = all_crds()
    for crd in crds.values():
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        panel = schema["verification"]["properties"]["panel"]
        assert {"tier", "maxRevisions", "maxParallel", "patternSweep"} <= set(panel["properties"])
        assert panel["properties"]["tier"]["enum"] == ["small", "medium", "large"]
        assert "rollouts" in schema["verification"]["properties"]["cbu"]["properties"]
