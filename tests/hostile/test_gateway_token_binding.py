"""A token that leaked to another trial's agent is refused there: each trial's token works on its own socket only.

Two trials of one campaign run at once. The *thief* holds the *victim*'s token (handed to it here, as a side
channel such as a shared kernel keyring once did) and calls the model with it, through its launcher and straight on
its socket: every call is refused (401, "another trial"), nothing is billed to the victim, and the victim's own call
with the same token on its own socket is answered and billed once.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from anchorage.campaigns.planning import plan
from anchorage.manifests import VerificationCampaign
from anchorage.runtime.local import sandbox
from anchorage.runtime.local.engine import run_campaign
from anchorage.runtime.local.gatewaystart import start_local_gateway
from anchorage.runtime.local.trials import LocalRuntime
from anchorage.tasks import Task
from hostile.conftest import PY, write_expected

pytestmark = pytest.mark.sandbox

CALL = """
import json, os, socket, time, urllib.error, urllib.request
def call(token):
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
                                     data=json.dumps({"model": "mock", "messages": [{"role": "user",
                                                      "content": "hi"}]}).encode(),
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
"""

THIEF = CALL + """
time.sleep(1)
for _ in range(3):
    status, text = call(STOLEN)
    print("launcher", status, "another trial" in text)
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
    sock.connect("/run/anchorage/gateway.sock")
    sock.sendall(b"GET /v1/models HTTP/1.1\\r\\nHost: gw\\r\\nAuthorization: Bearer " + STOLEN.encode() + b"\\r\\n\\r\\n")
    print("socket", sock.recv(12).decode().split()[-1])
"""

VICTIM = CALL + """
time.sleep(5)
status, _ = call(os.environ["OPENAI_API_KEY"])
print("own", status)
"""


def test_a_token_used_by_another_trials_agent_is_refused_and_billed_to_nobody(
        mechanism: sandbox.Mechanism, smoke_task: Task, tmp_path: Path) -> None:
    def entry(name: str, code: str) -> dict[str, object]:
        return {"name": name, "agent": {"kind": "command", "model": "mock",
                                        "command": [PY, "-c", textwrap.dedent(code) + write_expected(smoke_task)]}}

    spec = {"tasks": ["smoke-inventory"], "seeds": 1, "parallelism": 2,
            "entries": [entry("victim", VICTIM), entry("thief", "STOLEN = 'TOKEN'\n" + THIEF)]}
    document = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
                "metadata": {"name": "binding"}, "spec": spec}
    campaign = VerificationCampaign.model_validate(document)
    victim = next(p.name for p in plan("binding", campaign.spec, ["smoke-inventory"]) if p.entry == "victim")
    local = start_local_gateway()
    try:
        stolen = local.gateway.issue_token(victim, entry="victim", campaign="binding")  # what the leak would carry
        thief_code = "STOLEN = " + repr(stolen) + "\n" + THIEF
        spec["entries"] = [entry("victim", VICTIM), entry("thief", thief_code)]
        campaign = VerificationCampaign.model_validate(document)
        runtime = LocalRuntime(mechanism=mechanism, base_dir=tmp_path, gateway=local.gateway)
        outcome = run_campaign(campaign, tmp_path / "runs", runtime)
    finally:
        local.stop()
    records = {r.entry: r.to_json() for r in outcome.records}
    said = {name: (outcome.directory / r["name"] / "agent" / "stdout.log").read_text() for name, r in records.items()}
    assert said["thief"].splitlines() == ["launcher 401 True"] * 3 + ["socket 401"], said["thief"]
    assert said["victim"].splitlines() == ["own 200"], said["victim"]
    assert records["victim"]["usage"]["requests"] == 1  # its own call, and nothing of the thief's
    assert records["thief"]["usage"]["requests"] == 0
    assert all(r["phase"] == "Succeeded" for r in records.values())
