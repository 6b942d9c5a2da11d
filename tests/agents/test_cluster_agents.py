"""The three agent CLIs in the cluster: one trial each, in the agent image, through the operator and the gateway.

The agent image is built here (``anchorage.images``: buildah on a debootstrap base, cached by content under
``$ANCHORAGE_CACHE/images``) and its root folder given to the fake's kubelet (``ANCHORAGE_DEV_IMAGE_ROOTS``),
which then runs the agent's containers in it: the image's CLIs, Python stack and ``/etc``, with the Job's
command, environment, ``HOME`` and ``runAsUser`` — what a kubelet would run. The operator mints each trial's
token; a real gateway in front of the scripted mock model meters it. Each trial must reach Succeeded with
O-Eval 1.0 and the cost the scripted model's usage implies, and the script's first step checks, inside the
pod, that the agent runs as uid 65532 with ``HOME=/root`` and finds its CLI on the image's path.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

import imagetool
from anchorage import agents
from anchorage.gateway import Gateway, GatewayConfig, start_gateway
from anchorage.gateway.scripted import RunningScripted, start_scripted
from anchorage.gateway.scripts import Script, ScriptBook, Step, oracle_script

pytest.importorskip("anchorage_devcluster")
from controller.conftest import Env, _requirements, cluster_env

REPO = Path(__file__).resolve().parents[2]
TASK = "smoke-inventory"
TOKEN_SECRET, ADMIN_TOKEN = "cluster-agents-token-secret", "cluster-agents-admin-token"
API_OF = {"codex": "responses", "claude-code": "anthropic", "opencode": "chat"}
pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(10800)]


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return imagetool.ready()


@contextlib.contextmanager
def _mounted(tool: ModuleType, tag: str) -> Iterator[tuple[str, Path]]:
    """A root folder holding the image's files (a working container's mount), for the fake's kubelet."""
    ident = tool.buildah("from", "--pull-never", tag, quiet=True).strip()
    try:
        yield tag, Path(tool.buildah("mount", ident, quiet=True).strip())
    finally:
        subprocess.run(["buildah", *tool.storage(), "rm", ident], capture_output=True, check=False)


@pytest.fixture(scope="module")
def agent_image(tool: ModuleType) -> Iterator[tuple[str, Path]]:
    """The agent image (built or cached) and its root folder."""
    with _mounted(tool, tool.build("agent-base", tool.build_base())) as mounted:
        yield mounted


def _script(book_tasks: dict[str, Path], folder: Path) -> ScriptBook:
    """The task's oracle script, after a first step that checks who and where the agent is, in the pod."""
    oracle = oracle_script(book_tasks[TASK], TASK)
    check = Step(say="Who am I?", run='echo "agent uid=$(id -u) home=$HOME"; for c in codex claude opencode; do '
                                      'command -v "$c"; done; python3 -c "import numpy; print(numpy.__file__)"',
                 expect="agent uid=65532 home=/root")
    (folder / f"{TASK}.yaml").write_text(yaml.safe_dump(
        Script(task=TASK, steps=[check, *oracle.steps], final=oracle.final).model_dump(by_alias=True, exclude_none=True)))
    return ScriptBook(book_tasks, folder)


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Gateway, RunningScripted]]:
    monkeypatch.setenv("TEST_CA_TOKEN_SECRET", TOKEN_SECRET)
    monkeypatch.setenv("TEST_CA_ADMIN_TOKEN", ADMIN_TOKEN)
    (tmp_path / "scripts").mkdir()
    scripted = start_scripted(_script({TASK: REPO / "tasks" / TASK}, tmp_path / "scripts"))
    config = GatewayConfig.model_validate({
        "upstreams": scripted.upstreams(), "token_secret_env": "TEST_CA_TOKEN_SECRET",
        "admin_token_env": "TEST_CA_ADMIN_TOKEN", "admin_port": 0})
    running = start_gateway(config)
    try:
        yield running, scripted
    finally:
        running.stop()
        scripted.stop()


def _status(env: Env, plural: str, name: str) -> dict[str, Any]:
    out = env.kubectl("get", plural, name, "-o", "json", check=False)
    return (json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def test_one_trial_per_cli_in_the_agent_image_succeeds(agent_image: tuple[str, Path], gateway: tuple[Gateway, Any],
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tag, root = agent_image
    running, scripted = gateway
    monkeypatch.setenv("ANCHORAGE_DEV_IMAGE_ROOTS", f"{tag}={root}")
    _requirements()  # kubectl and bubblewrap, or a skip saying which is missing
    (tmp_path / "cluster").mkdir()
    with contextlib.ExitStack() as stack:
        env = stack.enter_context(cluster_env(tmp_path / "cluster", simulate=None, interval="0.5"))
        env.env.update(ANCHORAGE_GATEWAY_TOKEN_SECRET=TOKEN_SECRET, ANCHORAGE_GATEWAY_ADMIN_TOKEN=ADMIN_TOKEN)
        env.start_operator(f"--gateway-url={running.url}/v1", f"--gateway-admin-url={running.admin_url}",
                           f"--agent-image={tag}")
        entries = [{"name": kind, "agent": {"kind": kind, "model": model}} for kind, model in
                   (("codex", "gpt-5.5"), ("claude-code", "claude-sonnet-4"), ("opencode", "deepseek-flash"))]
        campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
                    "metadata": {"name": "clis"},
                    "spec": {"tasks": [TASK], "seeds": 1, "parallelism": 3, "entries": entries}}
        env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(campaign))
        env.wait_for(lambda: _status(env, "vc", "clis").get("phase") in ("Succeeded", "Failed"), 3600,
                     "the campaign of the three CLIs")
        replies = scripted.model.recorded()
        jobs = {j["metadata"]["name"]: j for j in env.objects("batch", "jobs")}
        for trial in env.objects("anchorage.dev", "trials"):
            entry, status = trial["spec"]["entry"], trial["status"]
            record = json.loads((env.store / "clis" / trial["metadata"]["name"] / "trial.json").read_text())
            assert (record["phase"], record["reason"]) == ("Succeeded", "completed"), (entry, record["message"])
            assert record["driver"] == "operator" and record["score"]["o_eval"] == 1.0
            mine = [r for r in replies if r.api == API_OF[entry] and r.slug == TASK]
            assert [r.kind for r in mine if r.kind in ("final", "off-script")] == ["final"], entry
            assert status["usage"]["requests"] == len(mine) and status["costUSD"] > 0
            pod = jobs[status["jobName"]]["spec"]["template"]["spec"]
            agent = pod["containers"][0]
            assert agent["image"] == tag and pod["securityContext"]["runAsUser"] == 65532
            path = next(e["value"] for e in agent["env"] if e["name"] == "PATH")
            assert path.startswith(agents.bin_dir(entry) + ":")


def test_an_agent_image_without_the_cli_is_the_platforms_failure_naming_the_fix(
        tool: ModuleType, gateway: tuple[Gateway, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Debian base as the agent image (no CLI in it): the check-agent init container fails the pod before the
    agent starts; the trial is InfrastructureFailed (never the model's failure) with the build fix in its message."""
    running, scripted = gateway
    with _mounted(tool, tool.build_base()) as (tag, root):
        monkeypatch.setenv("ANCHORAGE_DEV_IMAGE_ROOTS", f"{tag}={root}")
        _requirements()
        (tmp_path / "cluster").mkdir()
        with cluster_env(tmp_path / "cluster", simulate=None, interval="0.5") as env:
            env.env.update(ANCHORAGE_GATEWAY_TOKEN_SECRET=TOKEN_SECRET, ANCHORAGE_GATEWAY_ADMIN_TOKEN=ADMIN_TOKEN)
            env.start_operator(f"--gateway-url={running.url}/v1", f"--gateway-admin-url={running.admin_url}",
                               f"--agent-image={tag}")
            trial = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "no-cli"},
                     "spec": {"task": TASK, "agent": {"kind": "codex", "model": "gpt-5.5"}}}
            env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(trial))
            env.wait_for(lambda: _status(env, "trials", "no-cli").get("phase") not in (None, "Pending", "Running"),
                         900, "the trial without its CLI")
            status = _status(env, "trials", "no-cli")
    assert status["phase"] == "InfrastructureFailed", status
    assert "check-agent" in status["message"] and "AGENT_CLIS including codex" in status["message"]
    assert not scripted.model.recorded()  # the agent never started: no model request
