"""The real agent CLIs end to end: installed by ``anchorage agents install``, run in the sandbox, through the
gateway, against the scripted mock model — ``examples/agents.yaml`` exactly as a user runs it offline.

One campaign (3 entries × 2 tasks, run once per session): on the smoke task each CLI plays the task's
reproduction (the default script); on the dragon-dance task each replays ``examples/scripted``'s
multi-step trajectory (look around, write the solver, a failing run, the retry, a check). Each trial
must succeed and score O-Eval 1.0, and the tokens and cost in its ``trial.json`` must be exactly what
the scripted model reported for it, priced with the snapshot's own numbers.

The CLIs are installed into the cache (``$ANCHORAGE_CACHE`` or ``~/.cache/anchorage``): the first run
downloads them from npm (~1.2 GB, a few minutes), later runs reuse them. The campaign takes a few minutes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from anchorage import agentclis
from anchorage.campaigns.documents import load_documents
from anchorage.costs import default_snapshot_path
from anchorage.gateway.scripted import Reply
from anchorage.gateway.scripts import ScriptBook
from anchorage.manifests import AgentSpec, Trial, TrialSpec, VerificationCampaign
from anchorage.runtime.local.engine import resolve_tasks, run_campaign, run_single_trial
from anchorage.runtime.local.gatewaystart import LocalGateway, start_local_gateway
from anchorage.runtime.local.trials import LocalRuntime

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "agents.yaml"
SCRIPTS = REPO / "examples" / "scripted"
API_OF = {"codex": "responses", "claude-code": "anthropic", "opencode": "chat"}
SMOKE, DRAGON = "smoke-inventory", "cumcm-2024-a-dragon-dance"

pytestmark = pytest.mark.timeout(3600)


@pytest.fixture(scope="session")
def installed() -> None:
    """The pinned CLIs, installed the way a user does it (skipped only where npm does not exist)."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the agent CLIs cannot be installed (apt-get install nodejs npm)")
    done = subprocess.run([sys.executable, "-c", "from anchorage.cli import main; main()", "agents", "install", "all"],
                          capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(agentclis.state(name).installed for name in agentclis.pins())


@dataclass
class Ran:
    records: dict[tuple[str, str], dict[str, Any]]   # (entry, task) -> trial.json
    replies: list[Reply]
    directory: Path
    websocket_refusals: float  # WebSocket upgrades the campaign's gateway refused (codex's retries would count)


@pytest.fixture(scope="session")
def campaign(installed: None, mechanism: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    resource = load_documents(EXAMPLE)[0].resource
    assert isinstance(resource, VerificationCampaign)
    book = ScriptBook({task.slug: task.root for task in resolve_tasks(resource.spec)}, SCRIPTS)
    local = start_local_gateway(scripts=book)
    refused = websocket_refusals()
    try:
        runtime = LocalRuntime(mechanism=mechanism, base_dir=REPO / "examples", gateway=local.gateway)
        outcome = run_campaign(resource, tmp_path_factory.mktemp("runs"), runtime)
        replies = local.scripted.model.recorded()
        refused = websocket_refusals() - refused
    finally:
        local.stop()
    records = {(r.entry, r.task): r.to_json() for r in outcome.records}
    yield Ran(records, replies, outcome.directory, refused)


def websocket_refusals() -> float:
    """WebSocket upgrades the gateways of this process refused so far."""
    return REGISTRY.get_sample_value("anchorage_gateway_refusals_total", {"reason": "websocket"}) or 0.0


def reported(replies: list[Reply], api: str, slug: str) -> dict[str, int]:
    """What the scripted model reported for one conversation, normalised as the APIs define their fields."""
    total = {"requests": 0, "input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0}
    for reply in replies:
        if reply.api != api or reply.slug != slug:
            continue
        usage = reply.usage
        if api == "anthropic":   # input_tokens excludes cache reads and writes
            cached = usage["cache_read_input_tokens"]
            total_input = usage["input_tokens"] + cached + usage["cache_creation_input_tokens"]
            output = usage["output_tokens"]
        elif api == "chat":
            total_input, cached = usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]
            output = usage["completion_tokens"]
        else:
            total_input, cached = usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"]
            output = usage["output_tokens"]
        total["requests"] += 1
        total["input_tokens"] += total_input
        total["cached_input_tokens"] += cached
        total["output_tokens"] += output
    return total


def priced(model: str, tokens: dict[str, int]) -> float:
    """The snapshot's prices applied by hand (peak prices where a model has two)."""
    snapshot = yaml.safe_load(default_snapshot_path().read_text())
    entry = snapshot["models"][model]
    price = entry.get("peak", entry)
    cached_price = price.get("cached_input", price["input"])
    uncached = tokens["input_tokens"] - tokens["cached_input_tokens"]
    return float((uncached * price["input"] + tokens["cached_input_tokens"] * cached_price
                  + tokens["output_tokens"] * price["output"]) / snapshot["per_tokens"])


@pytest.mark.slow  # the first one's setup runs the module's campaign: the three CLIs on two tasks (~1 min)
@pytest.mark.parametrize("task", [SMOKE, DRAGON])
@pytest.mark.parametrize("entry", ["codex", "claude-code", "opencode"])
def test_each_cli_succeeds_and_is_billed_what_the_model_reported(campaign: Ran, entry: str, task: str) -> None:
    record = campaign.records[(entry, task)]
    folder = campaign.directory / record["name"]
    assert (record["phase"], record["reason"]) == ("Succeeded", "completed"), \
        f"{record['message']}\n{(folder / 'agent' / 'stderr.log').read_text()[-3000:]}"
    score = record["score"]
    assert score["gradable"] and score["o_eval"] == 1.0 and score["bo_eval"] == 1.0
    assert (folder / "artifacts" / f"{task}_result.json").is_file()
    tokens = reported(campaign.replies, API_OF[entry], task)
    usage = record["usage"]
    assert tokens["requests"] >= 5 and tokens["input_tokens"] > 0
    assert {key: usage[key] for key in tokens} == tokens
    model = record["agent"]["model"]
    assert usage["unpriced_models"] == [] and set(usage["by_model"]) == {model}
    assert record["cost_usd"] == pytest.approx(priced(model, tokens), rel=1e-9, abs=1e-12)
    assert record["cost_usd"] > 0


def test_codex_never_tries_a_websocket(campaign: Ran) -> None:
    """The gateway provider says ``supports_websockets=false``: codex posts at once, no upgrade refused."""
    assert [r for r in campaign.replies if r.api == "responses"]  # codex did talk to the gateway
    assert campaign.websocket_refusals == 0


@pytest.mark.parametrize("task", [SMOKE, DRAGON])
def test_the_entry_that_asks_for_transcripts_gets_them(campaign: Ran, task: str) -> None:
    """examples/agents.yaml keeps the codex entry's transcripts only: one line per model request."""
    for entry in ("claude-code", "opencode"):
        assert campaign.records[(entry, task)]["transcript"] is None
    record = campaign.records[("codex", task)]
    lines = (campaign.directory / record["name"] / "transcript.jsonl").read_text().splitlines()
    assert record["transcript"]["records"] == len(lines) == record["usage"]["requests"]
    calls = [json.loads(line) for line in lines]
    assert all(call["endpoint"] == "responses" and call["stream"] for call in calls)
    assert "exec_command" in calls[0]["response_sse"]  # the tool call as codex received it


@pytest.mark.parametrize("entry", ["codex", "claude-code", "opencode"])
def test_the_dragon_trajectory_really_ran_its_tool_calls(campaign: Ran, entry: str) -> None:
    """Every step was a tool call the CLI executed (its output fed the next step), the failing command too."""
    mine = [r for r in campaign.replies if r.api == API_OF[entry] and r.slug == DRAGON]
    script = yaml.safe_load((SCRIPTS / f"{DRAGON}.yaml").read_text())
    steps = [r.step for r in mine if r.kind == "tool"]
    assert steps == list(range(len(script["steps"])))
    assert [r.kind for r in mine if r.kind in ("final", "off-script")] == ["final"]
    log = (campaign.directory / campaign.records[(entry, DRAGON)]["name"] / "agent" / "stdout.log").read_text()
    assert "statement not found: /root/data/attachments/problem.md" in log   # the failing run, as the CLI saw it
    assert "wrote /root/results/cumcm-2024-a-dragon-dance_result.json" in log  # the retry


def test_a_missing_cli_is_an_infrastructure_failure_naming_the_install_command(
        mechanism: Any, local_gateway: LocalGateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path / "empty-cache"))
    trial = Trial.model_validate({"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial",
                                  "metadata": {"name": "no-cli"},
                                  "spec": TrialSpec(task=SMOKE, agent=AgentSpec(kind="codex", model="gpt-5.5"))
                                  .model_dump(by_alias=True, exclude_none=True)})
    runtime = LocalRuntime(mechanism=mechanism, base_dir=tmp_path, gateway=local_gateway.gateway)
    record = run_single_trial(trial, tmp_path / "runs", runtime).to_json()
    assert record["phase"] == "InfrastructureFailed" and record["reason"] == "sandbox_error"
    assert "anchorage agents install codex" in record["message"]
    assert record.get("score") is None
    json.dumps(record)


def test_the_readme_offline_command_runs_a_real_cli(installed: None, tmp_path: Path) -> None:
    """``anchorage run examples/agents.yaml --scripted-model --scripts examples/scripted`` as the README shows it,
    cut to one trial (codex on the smoke task): exit 0, the trial Succeeded."""
    done = subprocess.run([sys.executable, "-c", "from anchorage.cli import main; main()", "run", str(EXAMPLE),
                           "--scripted-model", "--scripts", str(SCRIPTS), "--entry", "codex", "--task", SMOKE,
                           "--runs-dir", str(tmp_path / "runs"), "--no-plots", "--json"],
                          capture_output=True, text=True, timeout=1800, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout)["results"][0]
    assert result["counts"] == {"Succeeded/completed": 1} and result["not_run"] == 5  # 3 entries x 2 tasks
    assert "scripted MOCK model" in done.stderr + done.stdout
