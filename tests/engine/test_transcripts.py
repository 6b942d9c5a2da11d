"""Transcripts in the local engine: opt-in per entry or campaign, written by the gateway (redacted), stored
beside ``trial.json`` where the agent cannot write, described in the record; off by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anchorage.campaigns.documents import load_documents
from anchorage.manifests import VerificationCampaign
from anchorage.runtime.local import sandbox
from anchorage.runtime.local.engine import run_campaign
from anchorage.runtime.local.gatewaystart import LocalGateway
from anchorage.runtime.local.trials import LocalRuntime
from engine.conftest import campaign_yaml

pytestmark = pytest.mark.sandbox


def test_transcripts_are_opt_in_per_entry_and_campaign(mechanism: sandbox.Mechanism, write_manifest,  # type: ignore[no-untyped-def]
                                                       local_gateway: LocalGateway, tmp_path: Path) -> None:
    entries = """\
    - {name: kept, transcripts: true, agent: {kind: mock}}
    - {name: default, agent: {kind: mock}}"""
    path = write_manifest(campaign_yaml("tx", entries))
    campaign = load_documents(path)[0].resource
    assert isinstance(campaign, VerificationCampaign)
    runtime = LocalRuntime(mechanism=mechanism, base_dir=tmp_path, gateway=local_gateway.gateway)
    outcome = run_campaign(campaign, tmp_path / "runs", runtime)
    records = {r.entry: r.to_json() for r in outcome.records}
    kept, default = records["kept"], records["default"]
    assert default["transcript"] is None and not (outcome.directory / default["name"] / "transcript.jsonl").exists()
    info = kept["transcript"]
    path = outcome.directory / kept["name"] / info["path"]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert info["records"] == len(lines) == kept["usage"]["requests"] >= 1
    assert info["bytes"] == path.stat().st_size and info["truncated"] is False
    first = lines[0]
    assert first["endpoint"] == "chat" and first["model"].startswith("mock")
    assert "smoke-inventory_result.json" in json.dumps(first["request"])  # the prompt as the agent sent it
    assert "atk-" not in path.read_text()  # the trial's token is redacted
    # campaign-wide, an entry may still say no
    spec = campaign.spec.model_copy(update={"transcripts": True})
    from anchorage.campaigns.planning import plan

    planned = {p.entry: p.spec.transcripts for p in plan("tx", spec, ["smoke-inventory"])}
    assert planned == {"kept": True, "default": True}
    spec.entries[0] = spec.entries[0].model_copy(update={"transcripts": False})
    assert {p.entry: p.spec.transcripts for p in plan("tx", spec, ["smoke-inventory"])}["kept"] is False
