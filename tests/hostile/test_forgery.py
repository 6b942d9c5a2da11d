"""Hostile agents forging an infrastructure failure: exit 125, ``bwrap:`` on stderr, a killed launcher.

An infrastructure failure is never scored and may be retried, so an agent doing badly would like one.
Only the sandbox's own status pipe (written before any agent code runs) can make a trial
``InfrastructureFailed``; the honest twin — a sandbox that really failed to start — shows that the
channel works.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from anchorage.runtime.local import interpreter, sandbox
from anchorage.runtime.local.sandbox import SandboxLimits, SandboxSpec
from hostile.conftest import RunAttack
from runtime.fake_gateway import FakeGateway

pytestmark = pytest.mark.sandbox

BWRAP_LINES = ("bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n"
               "bwrap: setting up uid map: Permission denied\n")


@pytest.mark.parametrize("exit_code", [125, 1, 126, 127])
def test_exit_codes_and_bwrap_lines_are_the_agents(attack: RunAttack, mech: sandbox.Mechanism,
                                                   exit_code: int) -> None:
    code = f"""
import sys
sys.stderr.write({BWRAP_LINES!r})
sys.stdout.write("sandbox_error\\n")
sys.exit({exit_code})
"""
    result = attack(code, mech, limits={"agentTimeoutSec": 30})
    assert result.phase_reason == ("Failed", "agent_error"), result.record
    assert result.record["score"]["bo_eval"] == -1.0  # scored as the model's own failure
    assert result.record["sandbox"]["started"] is True
    assert result.record["sandbox"]["evidence"]["status_pipe"] == "started"


def test_an_agent_that_kills_its_launcher_is_still_the_agents_failure(attack: RunAttack, mech: sandbox.Mechanism,
                                                                      tmp_path: Path) -> None:
    gateway = _Gateway(tmp_path / "gw.sock")
    code = """
import os, signal, sys
sys.stderr.write("bwrap: launcher died\\n")
os.kill(os.getppid(), signal.SIGKILL)   # the launcher relaying the gateway
os._exit(125)
"""
    try:
        result = attack(code, mech, gateway=gateway, model="mock")
    finally:
        gateway.stop()
    assert result.record["phase"] == "Failed", result.record
    assert result.record["reason"] in ("agent_error", "no_artifact")
    assert result.record["sandbox"]["started"] is True


def test_honest_twin_a_sandbox_that_never_started_is_infrastructure(attack: RunAttack, mech: sandbox.Mechanism,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    missing = Path("/nonexistent/anchorage-missing-prefix")
    layout = replace(interpreter.layout(), binds=(interpreter.Bind(missing, str(missing)),))
    monkeypatch.setattr(interpreter, "layout", lambda: layout)
    result = attack("print('never runs')", mech)
    assert result.phase_reason == ("InfrastructureFailed", "sandbox_error"), result.record
    assert result.record["sandbox"]["started"] is False
    assert "score" not in result.record or result.record.get("score") in (None, {})
    assert "never runs" not in result.stdout


def test_honest_twin_at_the_sandbox_level(mech: sandbox.Mechanism, tmp_path: Path) -> None:
    folders = {name: tmp_path / name for name in ("results", "logs")}
    for folder in folders.values():
        folder.mkdir()
    spec = SandboxSpec(argv=["/bin/true"], results_dir=folders["results"], logs_dir=folders["logs"],
                       limits=SandboxLimits(timeout_sec=20), ro_binds={"/x": tmp_path / "missing"})
    result = sandbox.run(spec, mechanism=mech)
    assert (result.outcome, result.started) == ("sandbox_error", False)
    assert "failed before starting the agent" in result.detail


class _Gateway:
    """A gateway stand-in with the engine's GatewayLike surface (tokens, usage), serving one reply."""

    def __init__(self, path: Path) -> None:
        self.fake = FakeGateway(path, '{"ok": true}')

    @property
    def unix_socket(self) -> Path:
        return self.fake.path

    def issue_token(self, trial_id: str, **_: object) -> str:
        return "tok-" + trial_id

    def open_trial_socket(self, trial_id: str) -> Path:
        return self.fake.path

    def close_trial_socket(self, trial_id: str) -> None:
        pass

    def usage(self, trial_id: str) -> dict[str, object]:
        return {"requests": 0, "cost_usd": 0.0}

    def stop(self) -> None:
        self.fake.stop()
