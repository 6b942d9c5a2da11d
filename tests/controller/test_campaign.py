"""A 3-entry × 2-task × 3-seed campaign completes in the fake and ranks like the local engine."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Env

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

TASKS = ["smoke-inventory", "cumcm-2024-b-production-decision"]


def campaign(name: str = "mini", parallelism: int = 4, suspend: bool = False) -> dict[str, Any]:
    write_empty = ["/bin/sh", "-c", "echo '{{}}' > /root/results/{task}_result.json"]
    return {
        "apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": name},
        "spec": {"tasks": TASKS, "seeds": 3, "parallelism": parallelism, "baseline": "empty", "suspend": suspend,
                 "entries": [{"name": "oracle", "agent": {"kind": "oracle"}},
                             {"name": "empty", "agent": {"kind": "command", "command": write_empty}},
                             {"name": "silent", "agent": {"kind": "command", "command": ["true"]}}]},
    }


def _status(env: Env, name: str) -> dict[str, Any]:
    out = env.kubectl("get", "vc", name, "-o", "json", check=False).stdout
    return (json.loads(out).get("status") or {}) if out else {}


def _max_active(env: Env, samples: list[int]) -> bool:
    trials = env.objects("anchorage.dev", "trials")
    samples.append(sum(1 for t in trials if (t.get("status") or {}).get("gradable") is None
                       and (t.get("status") or {}).get("phase") != "InfrastructureFailed"))
    return False


def test_campaign_completes_and_matches_the_local_engine(kube_env: Env, tmp_path: Path) -> None:
    from anchorage.manifests import VerificationCampaign
    from anchorage.runtime.local.engine import run_campaign
    from anchorage.runtime.local.trials import LocalRuntime

    kube_env.start_operator()
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(campaign()))
    active: list[int] = []
    kube_env.wait_for(lambda: _max_active(kube_env, active) or _status(kube_env, "mini").get("phase") == "Succeeded",
                      240, "the campaign to finish")
    status = _status(kube_env, "mini")
    failed = [(t["metadata"]["name"], t["status"].get("reason"), t["status"].get("message"))
              for t in kube_env.objects("anchorage.dev", "trials")
              if (t.get("status") or {}).get("phase") == "InfrastructureFailed"]
    assert status["progress"] == "18/18" and status["infrastructureFailed"] == 0, failed
    assert max(active) <= 4, f"more than parallelism trials were active: {max(active)}"
    assert len(kube_env.objects("anchorage.dev", "trials")) == 18
    # The local engine, pointed at the same run folders, reuses every record and aggregates them.
    local = run_campaign(VerificationCampaign.model_validate(campaign()), kube_env.store,
                         LocalRuntime(mechanism="none", base_dir=tmp_path))
    assert local.ran == 0 and local.reused == 18
    mine = {row["entry"]: row for row in status["leaderboard"]}
    assert [r["entry"] for r in status["leaderboard"]] == [r.entry for r in local.board.rows]
    for row in local.board.rows:
        assert math.isclose(mine[row.entry]["oEval"], row.o_eval_mean, abs_tol=1e-12)
        assert math.isclose(mine[row.entry]["boEval"], row.bo_eval_mean, abs_tol=1e-12)
        assert math.isclose(mine[row.entry]["oEvalStd"], row.o_eval_std, abs_tol=1e-12)
    assert status["bestEntry"] == "oracle" and math.isclose(status["bestOEval"], 1.0, abs_tol=1e-5)
    report = json.loads((kube_env.store / "mini" / "leaderboard.json").read_text())
    assert [r["entry"] for r in report["rows"]] == ["oracle", "empty", "silent"]
    silent = [t for t in kube_env.objects("anchorage.dev", "trials") if t["spec"]["entry"] == "silent"]
    assert {t["status"]["reason"] for t in silent} == {"no_artifact"}
    table = kube_env.kubectl("get", "vc").stdout
    assert "18/18" in table and "oracle" in table


def test_suspended_campaign_creates_nothing_until_resumed_and_deletion_cascades(kube_env: Env) -> None:
    kube_env.start_operator()
    doc = campaign("paused", parallelism=2, suspend=True)
    doc["spec"]["tasks"] = ["smoke-inventory"]
    doc["spec"]["seeds"] = 1
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    kube_env.wait_for(lambda: _status(kube_env, "paused").get("phase") == "Suspended", 30, "Suspended")
    assert kube_env.objects("anchorage.dev", "trials") == []
    kube_env.kubectl("patch", "vc", "paused", "--type=merge", "-p", '{"spec": {"suspend": false}}')
    kube_env.wait_for(lambda: _status(kube_env, "paused").get("phase") == "Succeeded", 120, "the campaign to finish")
    assert _status(kube_env, "paused")["progress"] == "3/3"
    kube_env.kubectl("delete", "vc", "paused")
    kube_env.wait_for(lambda: not kube_env.objects("anchorage.dev", "trials")
                      and not kube_env.objects("anchorage.dev", "scoringruns")
                      and not kube_env.objects("batch", "jobs"), 30, "owner-reference GC of the children")
