"""End to end in the cluster fake: kubectl → operator → Jobs → pods in the sandbox → store → scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from anchorage_devcluster.apiserver import Fault

from .conftest import REPO, Env

pytestmark = pytest.mark.sandbox


def _phase(env: Env, plural: str, name: str) -> str | None:
    out = env.kubectl("get", plural, name, "-o", "jsonpath={.status.phase}", check=False)
    return out.stdout or None


def _table(text: str) -> list[dict[str, str]]:
    """kubectl's table output as rows of {column: cell} (cells found by the header's offsets)."""
    header, *lines = text.splitlines()
    names = header.split()
    starts = [header.index(n) for n in names]
    ends = [*starts[1:], None]
    return [{n: line[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)} for line in lines]


def _scored(env: Env, name: str) -> bool:
    out = env.kubectl("get", "tr", name, "-o", "jsonpath={.status.oEval}", check=False).stdout
    return out != ""


def test_kubectl_apply_trial_runs_the_oracle_and_scores_it(kube_env: Env) -> None:
    kube_env.start_operator()
    kube_env.kubectl("apply", "-f", str(REPO / "examples" / "trial.yaml"))
    kube_env.wait_for(lambda: _scored(kube_env, "smoke-oracle-s0"), 90, "the trial to be scored")
    [row] = _table(kube_env.kubectl("get", "tr").stdout)
    assert row["NAME"] == "smoke-oracle-s0" and row["PHASE"] == "Succeeded"
    assert float(row["O-EVAL"]) == 1.0 and row["TASK"] == "smoke-inventory" and row["SEED"] == "0"
    trial = kube_env.get("tr", "smoke-oracle-s0")
    assert trial["status"]["oEval"] == 1.0 and trial["status"]["reason"] == "completed"
    conditions = {c["type"]: c["status"] for c in trial["status"]["conditions"]}
    assert conditions == {"Ready": "True", "Scored": "True", "Complete": "True", "Failed": "False",
                          "Reconciling": "False", "Stalled": "False"}  # kubectl wait --for=condition=Complete
    assert trial["status"]["observedGeneration"] == trial["metadata"]["generation"]  # kstatus compares them
    folder = kube_env.store / "_trials" / "default" / "smoke-oracle-s0"
    assert (folder / "artifacts" / "smoke-inventory_result.json").is_file()
    record = json.loads((folder / "trial.json").read_text())
    assert record["phase"] == "Succeeded" and record["score"]["o_eval"] == 1.0
    assert kube_env.get("sr", "smoke-oracle-s0-score")["status"]["phase"] == "Succeeded"
    # the Job was built as promised: one pod, no retries, deadline from the manifest
    # (the agent's own deadline, 300 s, is timed in its container; the Job's is that plus the platform's allowance)
    job = next(j for j in kube_env.objects("batch", "jobs") if j["metadata"]["name"] == "smoke-oracle-s0-a0")
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] > 300
    pod = job["spec"]["template"]
    assert pod["metadata"]["annotations"]["anchorage.dev/agent-timeout-seconds"] == "300"
    assert {p["metadata"]["name"] for p in kube_env.objects("networking.k8s.io", "networkpolicies")} >= {
        "anchorage-default-deny", "anchorage-gateway-egress"}
    described = kube_env.kubectl("describe", "tr", "smoke-oracle-s0").stdout
    assert "O Eval:" in described
    kube_env.kubectl("delete", "tr", "smoke-oracle-s0")
    kube_env.wait_for(lambda: not kube_env.objects("batch", "jobs"), 20, "owner GC of the Jobs")


@pytest.mark.parametrize(("doc", "fragment"), [
    ({"kind": "Trial", "spec": {"task": "smoke-inventory", "agent": {"kind": "oracle"}, "seed": -2}}, "spec.seed"),
    ({"kind": "Trial", "spec": {"task": "smoke-inventory", "agent": {"kind": "bash"}}}, "spec.agent.kind"),
    ({"kind": "VerificationCampaign", "spec": {"tasks": ["smoke-inventory"], "parallelism": 5000,
                                               "entries": [{"name": "o", "agent": {"kind": "oracle"}}]}},
     "spec.parallelism"),
    ({"kind": "VerificationCampaign", "spec": {"tasks": ["smoke-inventory"], "baseline": "flash",
                                               "entries": [{"name": "o", "agent": {"kind": "oracle"}}]}},
     "baseline"),
    ({"kind": "ScoringRun", "spec": {"trialRef": "a", "campaignRef": "b"}}, "exactly one of"),
], ids=["bad-seed", "unknown-agent-kind", "parallelism-out-of-range", "baseline-not-an-entry", "two-sources"])
def test_invalid_manifests_are_rejected_by_kubectl(kube_env: Env, doc: dict[str, Any], fragment: str) -> None:
    manifest = {"apiVersion": "anchorage.dev/v1alpha1", "metadata": {"name": "bad"}, **doc}
    result = kube_env.kubectl("apply", "-f", "-", check=False, stdin=yaml.safe_dump(manifest))
    assert result.returncode != 0
    assert "is invalid" in result.stderr and fragment in result.stderr, result.stderr


def test_limits_above_the_configured_ceiling_are_rejected(kube_env: Env, tmp_path: Path) -> None:
    from anchorage.commands.dev import render_crds

    ceiling = tmp_path / "crds"
    ceiling.mkdir()
    for name, text in render_crds({"cpus": 4}).items():
        (ceiling / name).write_text(text)
    kube_env.kubectl("apply", "-f", str(ceiling))
    manifest = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": "big"},
                "spec": {"task": "smoke-inventory", "agent": {"kind": "oracle"}, "limits": {"cpus": 8}}}
    result = kube_env.kubectl("apply", "-f", "-", check=False, stdin=yaml.safe_dump(manifest))
    assert result.returncode != 0 and "spec.limits.cpus" in result.stderr and "less than or equal to 4" in result.stderr


def test_operator_converges_through_injected_faults(kube_env: Env) -> None:
    from anchorage.manifests import TrialSpec
    from anchorage.runtime.kube.jobs import OperatorConfig, trial_job
    from anchorage.tasks import load_task, resolve_task
    from anchorage.trials import plan_agent
    from anchorage.trials.limits import resolve_limits

    # A previous operator created the Job and died before recording it: creating it again is a 409.
    kube_env.kubectl("apply", "-f", str(REPO / "examples" / "trial.yaml"))
    trial = kube_env.get("tr", "smoke-oracle-s0")
    config = OperatorConfig(store_uri=f"file://{kube_env.store}", task_source=str(REPO / "tasks"),
                            require_enforcement=False)  # as the operator runs here (the fake enforces no policy)
    spec = TrialSpec.model_validate(trial["spec"])
    task = load_task(resolve_task(spec.task))
    job = trial_job(trial, spec, plan=plan_agent(spec.agent, task, spec.seed), config=config,
                    limits=resolve_limits(task, spec.limits), job_name="smoke-oracle-s0-a0", campaign=None)
    kube_env.kubectl("create", "-f", "-", stdin=json.dumps(job))
    api = kube_env.cluster.api
    kube_env.thread.call(lambda: api.faults.extend([
        Fault(500, "PATCH", "/trials/smoke-oracle-s0/status", times=2), Fault(500, "POST", "/jobs", times=1),
        Fault(500, "PATCH", "/scoringruns/", times=1), Fault(500, "GET", "/scoringruns$", times=1)]))
    kube_env.start_operator()
    kube_env.wait_for(lambda: _phase(kube_env, "tr", "smoke-oracle-s0") is not None, 60, "the trial to start")
    kube_env.thread.call(lambda: api.expire("trials"))  # resuming watches now get 410 Gone
    kube_env.thread.loop.call_soon_threadsafe(lambda: kube_env.thread.loop.create_task(api.drop_watches()))
    kube_env.wait_for(lambda: _scored(kube_env, "smoke-oracle-s0"), 120, "the trial to be scored despite faults")
    assert kube_env.get("tr", "smoke-oracle-s0")["status"]["oEval"] == 1.0
    assert all(f.times == 0 for f in api.faults), "every injected fault was hit"
    jobs = [j["metadata"]["name"] for j in kube_env.objects("batch", "jobs")]
    assert sorted(jobs) == ["smoke-oracle-s0-a0", "smoke-oracle-s0-score-verify"]


def test_scoring_run_rescores_external_artifacts(kube_env: Env) -> None:
    external = kube_env.store / "third-party" / "astra"
    external.mkdir(parents=True)
    expected = REPO / "tasks" / "smoke-inventory" / "tests" / "expected_result.json"
    (external / "smoke-inventory_result.json").write_bytes(expected.read_bytes())
    run = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "ScoringRun", "metadata": {"name": "rescore"},
           "spec": {"task": "smoke-inventory", "artifacts": [
               {"uri": "third-party/astra/smoke-inventory_result.json", "entry": "astra", "seed": 0},
               {"uri": "third-party/missing/smoke-inventory_result.json", "entry": "ghost", "seed": 1}]}}
    kube_env.start_operator()
    kube_env.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(run))
    kube_env.wait_for(lambda: _phase(kube_env, "sr", "rescore") in ("Succeeded", "Failed"), 60, "the rescoring")
    status = kube_env.get("sr", "rescore")["status"]
    scores = {s["entry"]: s for s in status["scores"]}
    assert scores["astra"]["oEval"] == 1.0 and scores["astra"]["gradable"] is True
    assert scores["ghost"]["gradable"] is False and scores["ghost"]["boEval"] == -1
    record = json.loads((kube_env.store / scores["astra"]["recordUri"]).read_text())
    assert record["o_eval"] == 1.0
    # bounded: counts and a pointer to every summary in the store (here both fit in the status too)
    assert (status["artifacts"], status["gradable"], status["unscored"]) == (2, 1, 0)
    lines = (kube_env.store / status["scoresUri"].removeprefix(f"file://{kube_env.store}/")).read_text().splitlines()
    assert [json.loads(line) for line in lines] == status["scores"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {"Ready": "True", "Complete": "True", "Failed": "False", "Reconciling": "False",
                          "Stalled": "False"}
    # a lone run carries the operator's finalizer; deleting it lets it go (its verifier Job has ended)
    assert kube_env.get("sr", "rescore")["metadata"]["finalizers"] == ["anchorage.dev/stop-jobs"]
    kube_env.kubectl("delete", "sr", "rescore", "--timeout=30s")
    assert kube_env.kubectl("get", "sr", "rescore", check=False).returncode != 0
