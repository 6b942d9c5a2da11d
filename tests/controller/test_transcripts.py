"""Transcripts in the cluster fake: a Trial with ``transcripts: true`` gets its model calls, as the gateway kept
them (redacted), stored as ``transcript.jsonl`` beside ``trial.json`` by the operator; one without gets none."""

from __future__ import annotations

import json

import pytest
import yaml

from anchorage.gateway import Gateway

from .conftest import Env
from .test_gateway_trials import MODEL_AGENT, PROVIDER_KEY, _operator, _status, gateway  # noqa: F401 (fixture)

pytestmark = pytest.mark.sandbox


def test_the_operator_stores_the_transcript_a_trial_asks_for(kube_env: Env, gateway: Gateway) -> None:  # noqa: F811
    _operator(kube_env, gateway)
    for name, transcripts in (("with-tx", True), ("without-tx", False)):
        trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": name},
                 "spec": {"task": "smoke-inventory", "agent": MODEL_AGENT, "transcripts": transcripts}}
        kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(trial))
    for name in ("with-tx", "without-tx"):
        kube_env.wait_for(lambda n=name: _status(kube_env, "tr", n).get("gradable") is not None, 180, f"{name} scored")
    folder = kube_env.store / "_trials" / "default" / "with-tx"
    record = json.loads((folder / "trial.json").read_text())
    text = (folder / "transcript.jsonl").read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert record["transcript"]["records"] == len(lines) == record["usage"]["requests"] == 2
    assert record["transcript"]["path"] == "transcript.jsonl" and record["transcript"]["bytes"] == len(text.encode())
    assert {line["endpoint"] for line in lines} == {"chat"}
    assert "authenticated by" in json.dumps(lines[0]["request"])
    assert "atk-" not in text and PROVIDER_KEY not in text  # neither the trial's token nor the provider's key
    other = kube_env.store / "_trials" / "default" / "without-tx"
    assert not (other / "transcript.jsonl").exists()
    assert json.loads((other / "trial.json").read_text())["transcript"] is None
